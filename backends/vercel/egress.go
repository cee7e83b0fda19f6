package vercel

import (
	"slices"
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// sharedDomains maps terminal.egress_allow onto Vercel's domain list as far as it can:
// entries without a port (or with 80 or 443) become domains; entries with another port are
// left out (Vercel filters by domain, not port), which only narrows what is reachable.
func sharedDomains(entries []string) (domains, leftOut []string) {
	for _, e := range entries {
		r, err := egress.ParseRule(e)
		if err != nil {
			continue
		}
		if r.Port != 0 && r.Port != 80 && r.Port != 443 {
			leftOut = append(leftOut, e)
			continue
		}
		r.Port = 0
		if d := r.String(); !slices.Contains(domains, d) {
			domains = append(domains, d)
		}
	}
	return domains, leftOut
}

// Egress reports Vercel's own network policy: deny-all, the vercel.network_allow domains, or
// terminal.egress_allow mapped onto domains when vercel.network_allow is empty. A
// vercel.network_allow of its own counts as honouring terminal.egress_allow when Vercel lets
// through nothing the shared list does not name.
func (b *Backend) Egress() sandbox.EgressReport {
	allow := b.set.allow
	if b.set.fromShared {
		detail := "provider-enforced: Vercel's network policy lets the sandbox reach only terminal.egress_allow's hosts, by domain (Vercel does not filter ports)"
		if len(allow) > 0 {
			detail += ": " + strings.Join(allow, ", ")
		} else {
			detail += ": none of them (deny-all)"
		}
		if len(b.set.leftOut) > 0 {
			detail += "; left out, a domain list cannot name a port: " + strings.Join(b.set.leftOut, ", ")
		}
		return sandbox.EgressReport{Status: sandbox.EgressProviderEnforced, Allow: append([]string(nil), allow...), AppliesShared: true, Detail: detail}
	}
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
