//go:build unix

package modal

import (
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestEgressReport: Modal filters by CIDR only, so a name allowlist is never reported as applied.
func TestEgressReport(t *testing.T) {
	for _, tt := range []struct {
		cfg     config.ModalConfig
		status  string
		applies bool
	}{
		{config.ModalConfig{BlockNetwork: true}, sandbox.EgressNone, true},
		{config.ModalConfig{CIDRAllowlist: []string{"10.0.0.0/8"}}, sandbox.EgressProviderEnforced, false},
		{config.ModalConfig{}, sandbox.EgressOpen, false},
	} {
		rep := (&Backend{cfg: tt.cfg}).Egress()
		if rep.Status != tt.status || rep.AppliesShared != tt.applies {
			t.Errorf("Egress(%+v) = %+v; want %s, applies %v", tt.cfg, rep, tt.status, tt.applies)
		}
		if tt.status == sandbox.EgressProviderEnforced && !strings.Contains(rep.Detail, "CIDR only") {
			t.Errorf("Egress detail %q does not say CIDR only", rep.Detail)
		}
	}
}
