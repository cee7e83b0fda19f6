package modal

import "github.com/hermes-sandbox/hermes-sandbox/sandbox"

// Egress reports Modal's network settings. Modal filters by CIDR only, so a host-name
// allowlist (terminal.egress_allow) cannot be mapped onto it: with one set, egress by name
// is not available here.
func (b *Backend) Egress() sandbox.EgressReport {
	switch {
	case b.cfg.BlockNetwork:
		return sandbox.EgressReport{Status: sandbox.EgressNone, AppliesShared: true,
			Detail: "none: modal.block_network is true, the sandbox has no network"}
	case len(b.cfg.CIDRAllowlist) > 0:
		return sandbox.CIDREgress("Modal", "modal.cidr_allowlist", b.cfg.CIDRAllowlist)
	}
	return sandbox.EgressReport{Status: sandbox.EgressOpen,
		Detail: "open: modal.block_network is false with no modal.cidr_allowlist, the sandbox reaches any host; host-name filtering is not available on Modal"}
}

var _ sandbox.EgressReporter = (*Backend)(nil)
