//go:build unix

package vercel

import (
	"slices"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func TestEgressReport(t *testing.T) {
	for _, tt := range []struct {
		allow, shared []string
		status        string
		applies       bool
	}{
		{nil, nil, sandbox.EgressNone, true},
		{[]string{"pypi.org"}, nil, sandbox.EgressProviderEnforced, false},
		{[]string{"pypi.org", "api.github.com"}, []string{"pypi.org", "*.github.com"}, sandbox.EgressProviderEnforced, true},
		{[]string{"pypi.org", "evil.example"}, []string{"pypi.org"}, sandbox.EgressProviderEnforced, false},
	} {
		b := &Backend{set: settings{allow: tt.allow}, opts: sandbox.FactoryOptions{EgressAllow: tt.shared}}
		rep := b.Egress()
		if rep.Status != tt.status || rep.AppliesShared != tt.applies || rep.Detail == "" {
			t.Errorf("Egress(network_allow %q, terminal.egress_allow %q) = %+v; want %s, applies %v", tt.allow, tt.shared, rep, tt.status, tt.applies)
		}
	}
}

// TestSharedAllowlistMapsToDomains: with vercel.network_allow empty, terminal.egress_allow
// becomes Vercel's network policy as far as domains can say it.
func TestSharedAllowlistMapsToDomains(t *testing.T) {
	domains, left := sharedDomains([]string{"pypi.org", "*.github.com:443", "git.example.com:22", "PyPI.org", "files.pythonhosted.org:80"})
	if !slices.Equal(domains, []string{"pypi.org", "*.github.com", "files.pythonhosted.org"}) || !slices.Equal(left, []string{"git.example.com:22"}) {
		t.Errorf("sharedDomains = %q, left out %q", domains, left)
	}
	b := &Backend{set: settings{allow: domains, leftOut: left, fromShared: true}}
	rep := b.Egress()
	if rep.Status != sandbox.EgressProviderEnforced || !rep.AppliesShared || !strings.Contains(rep.Detail, "git.example.com:22") || !strings.Contains(rep.Detail, "does not filter ports") {
		t.Errorf("Egress() = %+v", rep)
	}
	if p := b.set.networkPolicy(); !slices.Equal(p.Allow, domains) || p.Mode == "deny-all" {
		t.Errorf("networkPolicy() = %+v; want the mapped domains", p)
	}
}
