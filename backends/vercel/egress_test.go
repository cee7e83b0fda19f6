package vercel

import (
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
		{nil, []string{"pypi.org"}, sandbox.EgressNone, true},
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
