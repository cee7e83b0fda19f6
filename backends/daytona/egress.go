package daytona

import "github.com/hermes-sandbox/hermes-sandbox/sandbox"

// Egress reports Daytona's network settings. Daytona filters by CIDR only
// (network_allow_list), so a host-name allowlist (terminal.egress_allow) cannot be mapped
// onto it: with one set, egress by name is not available here.
func (b *Backend) Egress() sandbox.EgressReport {
	switch {
	case b.cfg.NetworkBlockAll && len(b.cfg.NetworkAllowList) == 0:
		return sandbox.EgressReport{Status: sandbox.EgressNone, AppliesShared: true,
			Detail: "none: daytona.network_block_all is true with no daytona.network_allow_list, the sandbox reaches nothing"}
	case b.cfg.NetworkBlockAll:
		return sandbox.CIDREgress("Daytona", "daytona.network_allow_list", b.cfg.NetworkAllowList)
	}
	return sandbox.EgressReport{Status: sandbox.EgressOpen,
		Detail: "open: daytona.network_block_all is false, the sandbox reaches any host; host-name filtering is not available on Daytona"}
}

var _ sandbox.EgressReporter = (*Backend)(nil)
