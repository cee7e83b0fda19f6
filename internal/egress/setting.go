package egress

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// NewOverrides returns the Overrides of a backend whose proxy filters egress (docker,
// kubernetes), for its config section (e.g. "docker"): Base is the section's own
// egress_allow when set, else terminal.egress_allow (shared), and ConfigKey names the one
// in force.
func NewOverrides(dir, section string, own, shared []string, log *slog.Logger) Overrides {
	o := Overrides{Dir: dir, Base: own, ConfigKey: section + ".egress_allow", Logger: log, section: section, own: len(own) > 0}
	if !o.own {
		o.Base = shared
		if len(shared) > 0 {
			o.ConfigKey = "terminal.egress_allow"
		}
	}
	return o
}

// Report is the EgressReport of the proxy enforcing Base: how says what keeps every other
// connection out and ends where the setting's name follows; caveat, if any, is added last.
// terminal.egress_allow applies as given unless the section has a list of its own.
func (o Overrides) Report(how, caveat string) sandbox.EgressReport {
	detail := "enforced: " + how + o.ConfigKey
	if len(o.Base) == 0 {
		detail += " (empty: nothing is reachable until a person allows a host)"
	}
	return sandbox.EgressReport{Status: sandbox.EgressEnforced, Allow: slices.Clone(o.Base), Detail: detail + caveat,
		AppliesShared: !o.own}
}

// CheckChange refuses a change to session's allowlist (`sessions network`) that cannot
// apply: a bad session name, a backend whose network mode is not allowlist, a rule that
// does not parse.
func (o Overrides) CheckChange(backend, session, mode string, allow, deny []string) error {
	fail := func(err error) error { return &sandbox.Error{Backend: backend, Op: "network", ID: session, Err: err} }
	if err := sandbox.ValidateSessionName(session); err != nil {
		return fail(err)
	}
	if mode != "allowlist" {
		return fail(fmt.Errorf("%s.network is %s, not allowlist: there is no allowlist to change (hermes-sandbox config set %s.network allowlist): %w",
			o.section, mode, o.section, sandbox.ErrUnsupported))
	}
	if _, err := ParseRules(slices.Concat(allow, deny)); err != nil {
		return fail(fmt.Errorf("%v: %w", err, sandbox.ErrInvalidConfig))
	}
	return nil
}
