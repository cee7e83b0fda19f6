package daytona

import (
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Egress reports Daytona's network settings. Daytona filters by CIDR only
// (network_allow_list), so a host-name allowlist (terminal.egress_allow) cannot be mapped
// onto it: with one set, egress by name is not available here.
func (b *Backend) Egress() sandbox.EgressReport {
	switch {
	case b.cfg.NetworkBlockAll && len(b.cfg.NetworkAllowList) == 0:
		return sandbox.EgressReport{Status: sandbox.EgressNone, AppliesShared: true,
			Detail: "none: daytona.network_block_all is true with no daytona.network_allow_list, the sandbox reaches nothing"}
	case b.cfg.NetworkBlockAll:
		return sandbox.EgressReport{Status: sandbox.EgressProviderEnforced, Allow: append([]string(nil), b.cfg.NetworkAllowList...),
			Detail: "provider-enforced, by CIDR only: Daytona lets the sandbox reach " + strings.Join(b.cfg.NetworkAllowList, ", ") +
				" (daytona.network_allow_list); host names cannot be allowed by name, so terminal.egress_allow is not available here"}
	}
	return sandbox.EgressReport{Status: sandbox.EgressOpen,
		Detail: "open: daytona.network_block_all is false, the sandbox reaches any host; host-name filtering is not available on Daytona"}
}

var _ sandbox.EgressReporter = (*Backend)(nil)
