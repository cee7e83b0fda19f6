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
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/rule"
)

// Rule is one allowlist entry (see package rule).
type Rule = rule.Rule

// ParseRule parses one entry: NAME, *.NAME, NAME:PORT or *.NAME:PORT. IP addresses are
// refused: the allowlist names hosts, and the proxy resolves them itself.
func ParseRule(s string) (Rule, error) { return rule.Parse(s) }

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
	return h, rule.ValidName(h)
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
		if have.Port == 0 && r.Port != 0 && !slices.Contains(rule.DefaultPorts, r.Port) {
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
