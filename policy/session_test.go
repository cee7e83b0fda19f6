package policy

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

func sessionReader(files map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
}

func TestClassifyIn(t *testing.T) {
	c := New(Options{WorkDir: "/work", Home: "/home/u", ProtectedPaths: []string{"/home/u/.config/hermes-sandbox"}})
	files := map[string]string{
		"/tmp/x.sh":    "rm -rf ~/*",
		"/tmp/ok.sh":   "echo fine",
		"/work/list":   "/\n",
		"/work/a.py":   "import shutil; shutil.rmtree('/')",
		"/work/b.sh":   "sh /tmp/x.sh", // a file that runs another
		"/tmp/evil/ls": "#!/bin/sh\nrm -rf /\n",
	}
	tests := []struct {
		dir, cmd string
		env      map[string]string
		want     Verdict
		rule     string
	}{
		{"/", "rm -rf *", nil, VerdictHardline, "recursive-delete-root"},
		{"/work", "rm -rf *", nil, VerdictSafe, ""},
		{"/work/sub", "rm -rf ../*", nil, VerdictSafe, ""},
		{"", "rm -rf build", nil, VerdictDangerous, "recursive-delete-outside"},
		{"/work", "cd / && rm -rf *", nil, VerdictHardline, "recursive-delete-root"},
		{"/home/u/.config/hermes-sandbox", "echo x >> config.yaml", nil, VerdictHardline, "gate-config-write"},
		{"/work", "sh /tmp/x.sh", nil, VerdictHardline, "recursive-delete-home"},
		{"/work", "sh /tmp/ok.sh", nil, VerdictSafe, ""},
		{"/work", "sh b.sh", nil, VerdictHardline, "recursive-delete-home"},
		{"/work", "sh missing.sh", nil, VerdictSafe, ""},
		{"/work", "xargs rm -rf < list", nil, VerdictHardline, "recursive-delete-root"},
		{"/work", "python3 a.py", nil, VerdictHardline, "recursive-delete-root"},
		{"/work", "PATH=/tmp/evil:$PATH ls", nil, VerdictDangerous, "session-env-change"},
		{"/work", "ls", map[string]string{"PATH": "/tmp/evil:/usr/bin:/bin"}, VerdictHardline, "recursive-delete-root"},
		{"/work", "true", map[string]string{"BASH_ENV": "/tmp/x.sh"}, VerdictHardline, "recursive-delete-home"},
		{"/work", "true", map[string]string{"PROMPT_COMMAND": "rm -rf /"}, VerdictHardline, "recursive-delete-root"},
		{"/work", "true", map[string]string{"LD_PRELOAD": "/tmp/x.so"}, VerdictDangerous, "session-preload"},
		{"/work", `X=/; rm -rf "$X"*`, nil, VerdictHardline, "recursive-delete-root"},
		{"/work", `rm -rf "$TARGET"/*`, map[string]string{"TARGET": "/"}, VerdictHardline, "recursive-delete-root"},
	}
	for _, tt := range tests {
		a := c.ClassifyIn(Context{Dir: tt.dir, Env: tt.env, BasePath: "/usr/bin:/bin", ReadFile: sessionReader(files)}, tt.cmd)
		if a.Verdict != tt.want || (tt.rule != "" && !slices.ContainsFunc(a.Findings, func(f Finding) bool { return f.Rule == tt.rule })) {
			t.Errorf("ClassifyIn(%q in %q, %v) = %s %v; want %s [%s]", tt.cmd, tt.dir, tt.env, a.Verdict, a.Findings, tt.want, tt.rule)
		}
	}
}

func TestClassifyInUnreadable(t *testing.T) {
	c := New(Options{WorkDir: "/work"})
	read := func(string) ([]byte, error) { return nil, errors.New("permission denied") }
	a := c.ClassifyIn(Context{Dir: "/work", ReadFile: read}, "sh /tmp/x.sh")
	if a.Verdict != VerdictDangerous || len(a.Notes) == 0 || !strings.Contains(a.Notes[0], "/tmp/x.sh: permission denied") {
		t.Errorf("unreadable: %s %v %q", a.Verdict, a.Findings, a.Notes)
	}
	big := func(string) ([]byte, error) { return make([]byte, MaxScriptRead+1), nil }
	if a := c.ClassifyIn(Context{Dir: "/work", ReadFile: big}, "sh /tmp/x.sh"); a.Verdict != VerdictDangerous {
		t.Errorf("too large: %s %v", a.Verdict, a.Findings)
	}
}

func TestInterpreterListIsShared(t *testing.T) {
	for _, name := range []string{"python3", "/usr/bin/python3.12", "ipython", "node", "perl", "ruby", "irb", "Rscript"} {
		if !IsInterpreter(name) {
			t.Errorf("IsInterpreter(%q) = false", name)
		}
	}
	for _, name := range []string{"ls", "sh", "bash", "awk", "git"} {
		if IsInterpreter(name) {
			t.Errorf("IsInterpreter(%q) = true", name)
		}
	}
	a := New(Options{}).ClassifyIn(Context{Dir: "/w"}, `env FOO=1 timeout 5 sh -c "python3 -c 'print(1)'"`)
	if !slices.ContainsFunc(a.Runs, IsInterpreter) {
		t.Errorf("Runs = %v; want the interpreter behind the wrappers", a.Runs)
	}
}

func BenchmarkClassifyIn(b *testing.B) {
	c := New(Options{WorkDir: "/work", Home: "/home/u"})
	cmd := "git status --short && ls -la src/ | grep -v vendor > /tmp/out.txt"
	b.Run("Classify", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c.Classify(cmd)
		}
	})
	sc := Context{Dir: "/work/sub", Env: map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/home/u", "LANG": "C.UTF-8"},
		ReadFile: sessionReader(nil)}
	b.Run("ClassifyIn", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c.ClassifyIn(sc, cmd)
		}
	})
}
