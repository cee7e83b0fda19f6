// Package rule is the syntax of an egress allowlist entry (NAME, *.NAME, NAME:PORT or
// *.NAME:PORT), shared by the configuration's validation and the filtering proxy (package
// egress) without the one importing the other.
package rule

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// DefaultPorts are the ports an entry without `:port` allows.
var DefaultPorts = []int{80, 443}

// Rule is one allowlist entry.
type Rule struct {
	// Name is a lower-case host name; with Wildcard it is the suffix after "*.".
	Name     string
	Wildcard bool
	// Port is the one port allowed; 0 means DefaultPorts.
	Port int
}

// String is the entry as it is written in the configuration.
func (r Rule) String() string {
	s := r.Name
	if r.Wildcard {
		s = "*." + s
	}
	if r.Port != 0 {
		s += ":" + strconv.Itoa(r.Port)
	}
	return s
}

// Matches reports whether host:port is allowed by r. host must be normalised (lower
// case, no trailing dot; see egress.NormalizeHost). "*.github.com" matches api.github.com and a.b.github.com, not github.com.
func (r Rule) Matches(host string, port int) bool {
	if r.Port != 0 && r.Port != port {
		return false
	}
	if r.Port == 0 && !slices.Contains(DefaultPorts, port) {
		return false
	}
	if r.Wildcard {
		return strings.HasSuffix(host, "."+r.Name)
	}
	return host == r.Name
}

// Parse parses one entry: NAME, *.NAME, NAME:PORT or *.NAME:PORT. IP addresses are
// refused: the allowlist names hosts, and the proxy resolves them itself.
func Parse(s string) (Rule, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return Rule{}, fmt.Errorf("empty entry")
	}
	name, port := in, 0
	if strings.HasPrefix(name, "[") || strings.Count(name, ":") > 1 {
		return Rule{}, fmt.Errorf("%q is an IP address: name the host instead (IP literals are never allowed)", s)
	}
	if h, p, ok := strings.Cut(name, ":"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Rule{}, fmt.Errorf("%q: port %q must be a number from 1 to 65535", s, p)
		}
		name, port = h, n
	}
	r := Rule{Port: port}
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		r.Wildcard = true
		name = rest
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if strings.Contains(name, "*") {
		return Rule{}, fmt.Errorf("%q: a wildcard is allowed only as a leading \"*.\" (e.g. *.github.com)", s)
	}
	if net.ParseIP(name) != nil {
		return Rule{}, fmt.Errorf("%q is an IP address: name the host instead (IP literals are never allowed)", s)
	}
	if !ValidName(name) {
		return Rule{}, fmt.Errorf("%q is not a valid host name", s)
	}
	if r.Wildcard && !strings.Contains(name, ".") {
		return Rule{}, fmt.Errorf("%q would allow a whole top-level domain: name a domain (e.g. *.github.com)", s)
	}
	r.Name = name
	return r, nil
}

// ValidName reports whether s is a DNS host name: dot-separated labels of letters, digits,
// '-' and '_', none empty or longer than 63 bytes.
func ValidName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// ParseAll parses each entry with Parse.
func ParseAll(entries []string) ([]Rule, error) {
	var out []Rule
	for _, e := range entries {
		r, err := Parse(e)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
