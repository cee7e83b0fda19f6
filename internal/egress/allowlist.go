// Package egress is the filtering proxy that gives a sandbox with no route out a narrow way
// to the internet: an HTTP forward proxy with CONNECT for TLS that decides on the requested
// host name and port against an allowlist (exact names and `*.` wildcards, optional `:port`),
// resolves names itself, refuses IP literals, never decrypts, and reports every decision as
// an Event. The proxy serves connections from any source (a TCP listener in tests, the
// multiplexed relay stream of a docker session in production; see package egress/mux).
package egress

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

// Matches reports whether host:port is allowed by r. host must be normalised (see
// NormalizeHost). "*.github.com" matches api.github.com and a.b.github.com, not github.com.
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

// ParseRule parses one entry: NAME, *.NAME, NAME:PORT or *.NAME:PORT. IP addresses are
// refused: the allowlist names hosts, and the proxy resolves them itself.
func ParseRule(s string) (Rule, error) {
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
	if !validName(name) {
		return Rule{}, fmt.Errorf("%q is not a valid host name", s)
	}
	if r.Wildcard && !strings.Contains(name, ".") {
		return Rule{}, fmt.Errorf("%q would allow a whole top-level domain: name a domain (e.g. *.github.com)", s)
	}
	r.Name = name
	return r, nil
}

// validName reports whether s is a DNS host name: dot-separated labels of letters, digits,
// '-' and '_', none empty or longer than 63 bytes.
func validName(s string) bool {
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

// Allowlist is a parsed list of rules. The zero value allows nothing.
type Allowlist struct {
	rules []Rule
}

// ParseAllowlist parses every entry and reports every bad one at once.
func ParseAllowlist(entries []string) (Allowlist, error) {
	var a Allowlist
	var bad []string
	for _, e := range entries {
		r, err := ParseRule(e)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		if !slices.Contains(a.rules, r) {
			a.rules = append(a.rules, r)
		}
	}
	if len(bad) > 0 {
		return Allowlist{}, fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return a, nil
}

// Rules returns the rules in order.
func (a Allowlist) Rules() []Rule { return slices.Clone(a.rules) }

// Strings returns the rules as written.
func (a Allowlist) Strings() []string {
	out := make([]string, len(a.rules))
	for i, r := range a.rules {
		out[i] = r.String()
	}
	return out
}

// Allows reports whether host:port may be reached. host is normalised first; an IP literal
// is never allowed.
func (a Allowlist) Allows(host string, port int) bool {
	h, ok := NormalizeHost(host)
	if !ok {
		return false
	}
	for _, r := range a.rules {
		if r.Matches(h, port) {
			return true
		}
	}
	return false
}

// With returns a copy with add appended and every rule equal to one in remove dropped.
func (a Allowlist) With(add, remove []Rule) Allowlist {
	out := Allowlist{}
	for _, r := range a.rules {
		if !slices.Contains(remove, r) {
			out.rules = append(out.rules, r)
		}
	}
	for _, r := range add {
		if !slices.Contains(out.rules, r) && !slices.Contains(remove, r) {
			out.rules = append(out.rules, r)
		}
	}
	return out
}

// NormalizeHost lower-cases host and drops a trailing dot. It reports false for an IP
// literal or a name that is not a valid host name.
func NormalizeHost(host string) (string, bool) {
	h := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(host)), ".")
	if strings.HasPrefix(h, "[") || net.ParseIP(h) != nil || isNumericHost(h) {
		return h, false
	}
	return h, validName(h)
}

// isNumericHost catches the other spellings of an IPv4 address that resolvers accept
// (2130706433, 0x7f.1, 127.1): a name whose last label is all digits or hex.
func isNumericHost(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		return true
	}
	for _, c := range []byte(last) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Covers reports whether everything entry (an allowlist entry, possibly a wildcard) allows
// is also allowed by a, comparing names only (a provider's domain list has no ports, so an
// entry is taken at the default ports).
func (a Allowlist) Covers(entry string) bool {
	r, err := ParseRule(entry)
	if err != nil {
		return false
	}
	for _, have := range a.rules {
		if have.Port != 0 && have.Port != r.Port {
			continue
		}
		if have.Port == 0 && r.Port != 0 && !slices.Contains(DefaultPorts, r.Port) {
			continue
		}
		switch {
		case !r.Wildcard && r.Port != 0 && have.Matches(r.Name, r.Port),
			!r.Wildcard && r.Port == 0 && have.Matches(r.Name, 443) && have.Matches(r.Name, 80):
			return true
		case r.Wildcard && have.Wildcard && (r.Name == have.Name || strings.HasSuffix(r.Name, "."+have.Name)):
			return true
		}
	}
	return false
}
