package vercel

import (
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Egress reports Vercel's own network policy: deny-all, or the vercel.network_allow domains.
// terminal.egress_allow is not sent to Vercel; it counts as honoured when Vercel lets
// through nothing it does not list.
func (b *Backend) Egress() sandbox.EgressReport {
	allow := b.set.allow
	if len(allow) == 0 {
		return sandbox.EgressReport{Status: sandbox.EgressNone, AppliesShared: true,
			Detail: "none: Vercel's network policy is deny-all (vercel.network_allow is empty)"}
	}
	shared, _ := egress.ParseAllowlist(b.opts.EgressAllow)
	covered := true
	for _, d := range allow {
		covered = covered && shared.Covers(d)
	}
	return sandbox.EgressReport{Status: sandbox.EgressProviderEnforced, Allow: append([]string(nil), allow...), AppliesShared: covered,
		Detail: "provider-enforced: Vercel's network policy lets the sandbox reach only vercel.network_allow: " + strings.Join(allow, ", ")}
}

var _ sandbox.EgressReporter = (*Backend)(nil)
