package policy

import (
	"errors"
	"strings"
	"testing"
)

// TestOptionGrammars reads argument words the way each program reads them:
// each row is a program, its arguments and the expected reading, one
// letter per word (o option, v option value, e end of options, a operand).
func TestOptionGrammars(t *testing.T) {
	for _, tc := range []struct {
		prog string
		args string // words separated by spaces
		want string
	}{
		{"rg", "-- --pre sh", "e a a"},
		{"rg", "--pre-glob --pre needle", "o v a"},
		{"rg", "--pre=sh needle", "o a"},
		{"rg", "-e --pre -g *.go sh", "o v o v a"},
		{"rg", "-uuC2 x", "o a"},
		{"rg", "-C 2 x", "o v a"},
		{"sort", "-- --compress-program sh", "e a a"},
		{"sort", "--output --compress-program names.txt", "o v a"},
		{"sort", "-o --compress-program names.txt", "o v a"},
		{"sort", "-ro out --compress-program=gzip x", "o v o a"},
		{"sort", "--compress sh x", "o v a"},
		{"sort", "-rno out x", "o v a"},
		{"sort", "-rnoout x", "o a"},
		{"ag", "--ignore --pager needle", "o v a"},
		{"ag", "--pager less needle", "o v a"},
		{"man", "-P cat ls", "o v a"},
		{"man", "-H ls", "o a"},
		{"man", "-Hfirefox ls", "o a"},
		{"fd", "-e go -x rm", "o v o a"},
		{"go", "test -exec sh ./...", "a o v a"},
		{"go", "test -run=X -v ./...", "a o o a"},
		{"gdb", "-batch -ex bt ./prog", "o o v a"},
		{"sed", "-n -e p file", "o o v a"},
		{"sed", "-i.bak s/a/b/ file", "o a a"},
		{"sed", "-ne p file", "o v a"},
		{"sed", "--expr=p file", "o a"},
		{"tar", "-xf a.tar -C /tmp x", "o v o v a"},
		{"tar", "xf a.tar", "a a"},
		{"git push", "--force-with-lease=main origin", "o a"},
		{"chown", "--from root user f", "o v a a"},
	} {
		sp := grammarFor(tc.prog)
		if sp == nil {
			t.Fatalf("no grammar for %q", tc.prog)
		}
		var args []field
		for _, w := range strings.Fields(tc.args) {
			args = append(args, field{s: w})
		}
		_, rd := sp.read(args)
		var got []string
		for _, r := range rd {
			got = append(got, map[WordKind]string{WordOption: "o", WordValue: "v", WordEnd: "e", WordOperand: "a"}[r.Kind])
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%s read(%q) = %q; want %q", tc.prog, tc.args, g, tc.want)
		}
	}
}

// TestOptionCanonicalNames checks that abbreviated and attached forms are
// read as the option they stand for.
func TestOptionCanonicalNames(t *testing.T) {
	for _, tc := range []struct {
		prog, arg, name, val string
	}{
		{"sort", "--compress-prog=sh", "--compress-program", "sh"},
		{"sort", "--comp=sh", "--compress-program", "sh"},
		{"rg", "--pre=sh", "--pre", "sh"},
		{"sort", "-osorted", "-o", "sorted"},
		{"man", "-Hfirefox", "-H", "firefox"},
		{"go", "-exec=sh", "--exec", "sh"},
		{"go", "--toolexec=sh", "--toolexec", "sh"},
		{"gdb", "-eval-command=shell id", "--eval-command", "shell id"},
		{"sed", "--expression=1e id", "--expression", "1e id"},
	} {
		p, _ := grammarFor(tc.prog).read([]field{{s: tc.arg}})
		v, ok := p.value(tc.name)
		if !ok || v.s != tc.val {
			t.Errorf("%s read(%q): %s = %q, %v; want %q", tc.prog, tc.arg, tc.name, v.s, ok, tc.val)
		}
	}
}

// TestOptionsRunPrograms holds the verdicts of options that run programs:
// a real option is flagged in every spelling, a look-alike word that is an
// option's value or an operand is not.
func TestOptionsRunPrograms(t *testing.T) {
	c := New(Options{Home: "/home/u"})
	for _, tc := range []struct {
		cmd  string
		want Verdict
	}{
		{"rg -- --pre sh", VerdictSafe},
		{"sort -- --compress-program sh", VerdictSafe},
		{"rg --pre-glob --pre needle", VerdictSafe},
		{"sort --output --compress-program names.txt", VerdictSafe},
		{"sort -o --compress-program names.txt", VerdictSafe},
		{"ag --ignore --pager needle", VerdictSafe},
		{"rg -e --pre needle", VerdictSafe},
		{"sort --compress-prog=sh x", VerdictDangerous},
		{"sort --compress sh x", VerdictDangerous},
		{"sort -S 1G --compress-program=./evil x", VerdictDangerous},
		{"rg --pre=sh needle", VerdictDangerous},
		{"rg --pre ./decrypt.sh needle", VerdictDangerous},
		{"ag --pager 'sh -c id' x", VerdictDangerous},
		{"man -P 'sh -c id' ls", VerdictDangerous},
		{"man -Hsh ls", VerdictDangerous},
		{"tar --to-command=sh -xf a.tar", VerdictDangerous},
		{"git -c core.pager=sh log", VerdictDangerous},
		{"LESSOPEN='|sh %s' less x", VerdictDangerous},
		{"go test -exec 'rm -rf /' ./...", VerdictHardline},
		{"go test -exec=\"rm -rf /\" ./...", VerdictHardline},
		{"fd -e go -x rm -rf / \\;", VerdictHardline},
		{"gdb -batch -ex '!rm -rf /'", VerdictHardline},
		{"rg --pre cat needle", VerdictSafe},
		{"sort -o out.txt in.txt", VerdictSafe},
	} {
		if got := c.Classify(tc.cmd).Verdict; got != tc.want {
			t.Errorf("Classify(%q) = %s; want %s", tc.cmd, got, tc.want)
		}
	}
}

// TestSedScripts reads sed's own language: e, s///e, w, W and r are found
// in the script operand, -e, --expression= and -f files; the payload-free
// twins stay safe.
func TestSedScripts(t *testing.T) {
	c := New(Options{Home: "/home/me"})
	for _, tc := range []struct {
		cmd  string
		want Verdict
	}{
		{`sed -n '1e rm -rf /srv/victim' /etc/hostname`, VerdictDangerous},
		{`sed '1e id' f`, VerdictDangerous},
		{`sed -e 'e rm -rf /' f`, VerdictHardline},
		{`sed --expression='1e rm -rf /' f`, VerdictHardline},
		{`sed 's/.*/cat ~\/.ssh\/id_ed25519/e' /etc/hostname`, VerdictDangerous},
		{`sed -n 'w /home/me/.config/hermes-sandbox/config.yaml' payload.yaml`, VerdictHardline},
		{`sed -n '/x/W /home/me/.bashrc' payload`, VerdictDangerous},
		{`sed 's/a/b/w /home/me/.ssh/authorized_keys' f`, VerdictDangerous},
		{`sed '1r /home/me/.ssh/id_rsa' f`, VerdictDangerous},
		{`sed -n '1p' /etc/hostname`, VerdictSafe},
		{`sed -n 's/e/E/gp' notes.txt`, VerdictSafe},
		{`sed 's/x/y/;/e/d' f`, VerdictSafe},
		{`sed -e 's/^/  /' -e '/^$/d' f`, VerdictSafe},
		{`sed 'a\ hello' f`, VerdictSafe},
		{`sed '/start/,/end/{s/old/new/g}' f`, VerdictSafe},
		{`sed -n '/error/w errors.log' app.log`, VerdictSafe},
		{`sed 'y/abc/xyz/' f`, VerdictSafe},
	} {
		if got := c.Classify(tc.cmd).Verdict; got != tc.want {
			t.Errorf("Classify(%q) = %s; want %s", tc.cmd, got, tc.want)
		}
	}
}

// TestSedScriptFile reads a -f script through the session, as sed will.
func TestSedScriptFile(t *testing.T) {
	c := New(Options{Home: "/home/me"})
	files := map[string]string{"/w/evil.sed": "1e rm -rf /\n", "/w/ok.sed": "s/a/b/g\n"}
	sc := Context{Dir: "/w", ReadFile: func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, errNotFoundForTest
	}}
	if got := c.ClassifyIn(sc, "sed -f evil.sed notes.txt").Verdict; got != VerdictHardline {
		t.Errorf("ClassifyIn(sed -f evil.sed) = %s; want hardline", got)
	}
	if got := c.ClassifyIn(sc, "sed -f ok.sed notes.txt").Verdict; got != VerdictSafe {
		t.Errorf("ClassifyIn(sed -f ok.sed) = %s; want safe", got)
	}
}

var errNotFoundForTest = errors.New("no such file")
