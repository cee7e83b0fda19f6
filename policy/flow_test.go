package policy

import (
	"io/fs"
	"path"
	"testing"
)

// TestLineDataFlow: a file written, copied or linked earlier in a command line is judged by
// what it will hold when the line runs it, not by what the disk holds before the line runs.
func TestLineDataFlow(t *testing.T) {
	disk := map[string]string{
		"/work/evil.sh": "rm -rf ~/*\n",
		"/work/evil.py": "import shutil\nshutil.rmtree('/')\n",
		"/work/run.sh":  "echo hi\n",
		"/work/ok.sh":   "echo fine\n",
	}
	sc := Context{Dir: "/work", WorkDir: "/work", Env: map[string]string{"PATH": defaultPath, "HOME": "/home/u"},
		ReadFile: func(p string) ([]byte, error) {
			if !path.IsAbs(p) {
				p = path.Join("/work", p)
			}
			if s, ok := disk[p]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}}
	cl := New(Options{Home: "/home/u"})
	tests := []struct {
		cmd  string
		want Verdict
		rule string
	}{
		// the payload's content flows into the file that runs
		{"cp evil.sh run.sh && sh run.sh", VerdictHardline, "recursive-delete-home"},
		{"cp evil.sh run.sh && ./run.sh", VerdictHardline, "recursive-delete-home"},
		{"cp -f evil.sh run.sh; bash run.sh", VerdictHardline, "recursive-delete-home"},
		{"cp evil.sh run.sh && source run.sh", VerdictHardline, "recursive-delete-home"},
		{"cp evil.sh a.sh && cp a.sh run.sh && . ./run.sh", VerdictHardline, "recursive-delete-home"},
		{"cat evil.sh > run.sh && sh run.sh", VerdictHardline, "recursive-delete-home"},
		{"cat < evil.sh > run.sh && sh run.sh", VerdictHardline, "recursive-delete-home"},
		{"tee run.sh < evil.sh >/dev/null && sh run.sh", VerdictHardline, "recursive-delete-home"},
		{"ln -sf evil.sh run.sh && sh run.sh", VerdictHardline, "recursive-delete-home"},
		{"ln -sf /work/evil.sh /tmp/r && sh /tmp/r", VerdictHardline, "recursive-delete-home"},
		{"mkdir -p bin && ln -s ../evil.sh bin/run && sh bin/run", VerdictHardline, "recursive-delete-home"},
		{"dd if=evil.sh of=run.sh && sh run.sh", VerdictHardline, "recursive-delete-home"},
		{"mv evil.sh run.sh && sh run.sh", VerdictHardline, "recursive-delete-home"},
		{"install -m 755 evil.sh run.sh && ./run.sh", VerdictHardline, "recursive-delete-home"},
		{"cp evil.sh /tmp/r.sh && sh /tmp/r.sh", VerdictHardline, "recursive-delete-home"},
		{"cp evil.py run.py && python3 run.py", VerdictHardline, "recursive-delete-root"},
		// content the gate cannot see, written earlier in the line, asks
		{"sed -n 'w run.sh' evil.sh && sh run.sh", VerdictDangerous, "run-unseen-content"},
		{`python3 -c 'import shutil; shutil.copy("evil.sh", "run.sh")' && sh run.sh`, VerdictDangerous, "run-unseen-content"},
		{"tar xf a.tar && mv x.sh run.sh && sh run.sh", VerdictDangerous, "run-unseen-content"},
		{"tar -xzf a.tgz && ./run.sh", VerdictDangerous, "run-unseen-content"},
		{"unzip -o a.zip && sh run.sh", VerdictDangerous, "run-unseen-content"},
		{"git checkout other -- run.sh && ./run.sh", VerdictDangerous, "run-unseen-content"},
		{"rsync evil.sh run.sh && sh run.sh", VerdictDangerous, "run-unseen-content"},
		{"make > run.sh && sh run.sh", VerdictDangerous, "run-unseen-content"},
		// benign twins
		{"sh run.sh", VerdictSafe, ""},
		{"cp ok.sh run.sh && sh run.sh", VerdictSafe, ""},
		{"cp evil.sh backup.sh && sh run.sh", VerdictSafe, ""},
		{"cat ok.sh > run.sh && sh run.sh", VerdictSafe, ""},
		{"ln -sf ok.sh run.sh && ./run.sh", VerdictSafe, ""},
		{"tar xf a.tar && ls", VerdictSafe, ""},
		{"tar tf a.tar && sh run.sh", VerdictSafe, ""},
		{"sed -n '1p' evil.sh && sh run.sh", VerdictSafe, ""},
		{`python3 -c 'print(1)' && sh run.sh`, VerdictSafe, ""},
		{"cp evil.sh run.sh && cp ok.sh run.sh && sh run.sh", VerdictSafe, ""},
	}
	for _, tt := range tests {
		got := cl.ClassifyIn(sc, tt.cmd)
		if got.Verdict != tt.want || tt.rule != "" && !hasRule(got, tt.rule) {
			t.Errorf("ClassifyIn(%q) = %s %v; want %s with %s", tt.cmd, got.Verdict, got.Findings, tt.want, tt.rule)
		}
	}
}

// TestRebindings: forms that make a name run something else are read as what they run.
func TestRebindings(t *testing.T) {
	tests := []struct {
		cmd  string
		want Verdict
		rule string
	}{
		{"hash -p /bin/rm ls; ls -rf ~/", VerdictHardline, "recursive-delete-home"},
		{"hash -p /bin/rm ls", VerdictDangerous, "command-rebound"},
		{"hash -p/bin/sh ls", VerdictDangerous, "command-rebound"},
		{"env 'BASH_FUNC_ls%%=() { rm -rf ~/; }' bash -c ls", VerdictHardline, "recursive-delete-home"},
		{"export 'BASH_FUNC_ls%%=() { echo hi; }'", VerdictDangerous, "command-rebound"},
		{"env 'BASH_FUNC_git()=() { id; }' bash -c 'git status'", VerdictDangerous, "command-rebound"},
		{`python3 -c 'import shutil; f=shutil.rmtree; f("/")'`, VerdictHardline, "recursive-delete-root"},
		{`python3 -c 'import os; s = os.system; s("rm -rf ~/")'`, VerdictHardline, "recursive-delete-home"},
		{`node -e 'const cp = require("child_process"); const run = cp.execSync; run("rm -rf ~/")'`, VerdictHardline, "recursive-delete-home"},
		// benign twins
		{"hash -p /usr/bin/ls ls", VerdictSafe, ""},
		{"hash -r", VerdictSafe, ""},
		{"export LS_COLORS=auto", VerdictSafe, ""},
		{`python3 -c 'x = 1; print(x)'`, VerdictSafe, ""},
		{`python3 -c 'import os; j = os.path.join; print(j("a", "b"))'`, VerdictSafe, ""},
	}
	for _, tt := range tests {
		got := Classify(tt.cmd)
		if got.Verdict != tt.want || tt.rule != "" && !hasRule(got, tt.rule) {
			t.Errorf("Classify(%q) = %s %v; want %s with %s", tt.cmd, got.Verdict, got.Findings, tt.want, tt.rule)
		}
	}
}
