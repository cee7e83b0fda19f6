//go:build unix

package egress

import "testing"

func TestAllowlistAllows(t *testing.T) {
	a, err := ParseAllowlist([]string{"pypi.org", "*.github.com", "git.example.com:22", "*.corp.test:8443"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host string
		port int
		want bool
	}{
		{"pypi.org", 443, true},
		{"pypi.org", 80, true},
		{"PYPI.ORG.", 443, true},
		{"pypi.org", 8080, false},
		{"evil.pypi.org", 443, false},
		{"pypi.org.evil.test", 443, false},
		{"notpypi.org", 443, false},
		{"api.github.com", 443, true},
		{"a.b.github.com", 80, true},
		{"github.com", 443, false}, // *.github.com names subdomains only
		{"evilgithub.com", 443, false},
		{"git.example.com", 22, true},
		{"git.example.com", 443, false},
		{"x.corp.test", 8443, true},
		{"x.corp.test", 443, false},
		{"127.0.0.1", 443, false},
		{"2130706433", 80, false},
		{"0x7f.1", 80, false},
		{"[::1]", 443, false},
		{"", 443, false},
	}
	for _, tt := range tests {
		if got := a.Allows(tt.host, tt.port); got != tt.want {
			t.Errorf("Allows(%q, %d) = %v; want %v", tt.host, tt.port, got, tt.want)
		}
	}
	var zero Allowlist
	if zero.Allows("pypi.org", 443) {
		t.Error("the zero Allowlist allows pypi.org; want nothing allowed")
	}
	if _, err := ParseAllowlist([]string{"ok.test", "1.1.1.1", "*.com"}); err == nil {
		t.Error("ParseAllowlist with two bad entries = nil error")
	}
}

func TestAllowlistWith(t *testing.T) {
	a, _ := ParseAllowlist([]string{"pypi.org", "evil.test"})
	add, _ := ParseRule("new.test")
	rm, _ := ParseRule("evil.test")
	b := a.With([]Rule{add}, []Rule{rm})
	if got := b.Strings(); len(got) != 2 || got[0] != "pypi.org" || got[1] != "new.test" {
		t.Errorf("With = %v; want [pypi.org new.test]", got)
	}
	if b.Allows("evil.test", 443) || !b.Allows("new.test", 443) {
		t.Errorf("With: evil.test allowed or new.test refused: %v", b.Strings())
	}
}

func TestAllowlistCovers(t *testing.T) {
	a, _ := ParseAllowlist([]string{"pypi.org", "*.github.com", "git.example.com:22"})
	for _, tt := range []struct {
		entry string
		want  bool
	}{
		{"pypi.org", true}, {"files.pythonhosted.org", false}, {"api.github.com", true}, {"*.github.com", true},
		{"*.api.github.com", true}, {"*.pypi.org", false}, {"github.com", false}, {"git.example.com:22", true},
		{"git.example.com", false}, {"1.2.3.4", false},
	} {
		if got := a.Covers(tt.entry); got != tt.want {
			t.Errorf("Covers(%q) = %v; want %v", tt.entry, got, tt.want)
		}
	}
}
