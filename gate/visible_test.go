package gate

import (
	"strings"
	"testing"
)

func TestVisible(t *testing.T) {
	cases := []struct{ in, want string }{
		{"ls -la", "ls -la"},
		{"echo a\nrm b", "echo a\nrm b"},
		{"rm -rf ~ # \x1b[2K\x1b[1G\x1b[Acat notes.txt", `rm -rf ~ # \x1b[2K\x1b[1G\x1b[Acat notes.txt`},
		{"rm -rf ~\rls", `rm -rf ~\rls`},
		{"ls\bx", `ls\x08x`},
		{"a\tb", `a\tb`},
		{"\x7f", `\x7f`},
		{"echo \u202egnp.exe", `echo \u202egnp.exe`},
		{"r\u200bm", `r\u200bm`},
		{"x\u2066y\u2069", `x\u2066y\u2069`},
		{"a\u00a0b\u3000c", `a\u00a0b\u3000c`},
		{"a\u0085b\u2028c", `a\u0085b\u2028c`},
		{"\ufeffls", `\ufeffls`},
		{"tag\U000e0041", `tag\U000e0041`},
		{"blank\u3164", `blank\u3164`},
		{"bad \xff\xfe", `bad \xff\xfe`},
		{"echo café ünïcödé 日本", "echo café ünïcödé 日本"},
	}
	for _, c := range cases {
		if got := Visible(c.in); got != c.want {
			t.Errorf("Visible(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}

// TestVisibleLeavesNothingHidden runs every code point through Visible: the result holds no
// control, format, separator or non-ASCII space character.
func TestVisibleLeavesNothingHidden(t *testing.T) {
	var b strings.Builder
	for r := rune(0); r < 0x30000; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue
		}
		b.WriteRune(r)
	}
	b.WriteString("\U000e0001\U000e007f\U000e0100")
	for _, r := range Visible(b.String()) {
		if r == '\n' {
			continue
		}
		if r < 0x20 || r == 0x7f || hiddenRune(r) {
			t.Fatalf("Visible left %U in its output", r)
		}
	}
}
