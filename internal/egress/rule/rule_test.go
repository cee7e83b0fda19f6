package rule

import "testing"

func TestParse(t *testing.T) {
	good := []struct {
		in   string
		want string
	}{
		{"pypi.org", "pypi.org"},
		{"PyPI.org.", "pypi.org"},
		{"*.github.com", "*.github.com"},
		{"registry.npmjs.org:8443", "registry.npmjs.org:8443"},
		{"*.example.com:22", "*.example.com:22"},
		{"  files.pythonhosted.org ", "files.pythonhosted.org"},
	}
	for _, tt := range good {
		r, err := Parse(tt.in)
		if err != nil || r.String() != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %s", tt.in, r, err, tt.want)
		}
	}
	bad := []string{"", "1.2.3.4", "[::1]:443", "::1", "*.com", "a.*.com", "pypi.org:0", "pypi.org:70000", "pypi.org:x",
		"exa mple.com", "*", "-bad.com", "1.2.3.4:443"}
	for _, in := range bad {
		if r, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, nil; want an error", in, r)
		}
	}
}

func TestMatches(t *testing.T) {
	tests := []struct {
		rule, host string
		port       int
		want       bool
	}{
		{"pypi.org", "pypi.org", 443, true},
		{"pypi.org", "pypi.org", 80, true},
		{"pypi.org", "pypi.org", 22, false},
		{"pypi.org", "www.pypi.org", 443, false},
		{"*.github.com", "api.github.com", 443, true},
		{"*.github.com", "a.b.github.com", 443, true},
		{"*.github.com", "github.com", 443, false},
		{"*.github.com", "evilgithub.com", 443, false},
		{"example.com:8443", "example.com", 8443, true},
		{"example.com:8443", "example.com", 443, false},
	}
	for _, tt := range tests {
		r, err := Parse(tt.rule)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.rule, err)
		}
		if got := r.Matches(tt.host, tt.port); got != tt.want {
			t.Errorf("Parse(%q).Matches(%q, %d) = %v; want %v", tt.rule, tt.host, tt.port, got, tt.want)
		}
	}
}

func TestParseAll(t *testing.T) {
	got, err := ParseAll([]string{"pypi.org", "*.github.com:22"})
	if err != nil || len(got) != 2 || got[1].String() != "*.github.com:22" {
		t.Errorf("ParseAll = %v, %v; want two rules, the second *.github.com:22", got, err)
	}
	if got, err := ParseAll([]string{"pypi.org", "1.2.3.4"}); err == nil {
		t.Errorf("ParseAll with an IP = %v, nil; want an error", got)
	}
}
