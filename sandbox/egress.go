package sandbox

import (
	"slices"
	"strings"
	"time"
)

// Egress statuses: how far a backend enforces an egress allowlist with its current settings.
const (
	// EgressEnforced: this tool enforces the allowlist itself (the filtering proxy of docker
	// and kubernetes).
	EgressEnforced = "enforced"
	// EgressProviderEnforced: the provider's own network policy enforces it.
	EgressProviderEnforced = "provider-enforced"
	// EgressNotAvailable: nothing enforces an allowlist; commands reach whatever the host
	// or sandbox can reach.
	EgressNotAvailable = "not available"
	// EgressNone: the sandbox has no network at all, so there is nothing to allow.
	EgressNone = "none"
	// EgressOpen: the backend could filter but is configured with an open network.
	EgressOpen = "open"
)

// EgressReport says what a backend enforces about outbound connections.
type EgressReport struct {
	// Status is one of the Egress* constants.
	Status string `json:"status"`
	// Allow is the allowlist in force (as the provider or proxy sees it), if any.
	Allow []string `json:"allow,omitempty"`
	// Detail is one sentence for people and models: what is enforced, by what, and how
	// terminal.egress_allow maps onto it.
	Detail string `json:"detail"`
	// AppliesShared says whether terminal.egress_allow (FactoryOptions.EgressAllow) is
	// enforced as given. When it is set and this is false, running commands would mislead:
	// callers refuse.
	AppliesShared bool `json:"applies_shared"`
}

// CIDREgress is the report of a provider whose network policy filters by CIDR only (setting
// is the key listing cidrs): a host-name allowlist cannot be mapped onto it.
func CIDREgress(provider, setting string, cidrs []string) EgressReport {
	return EgressReport{Status: EgressProviderEnforced, Allow: slices.Clone(cidrs),
		Detail: "provider-enforced, by CIDR only: " + provider + " lets the sandbox reach " + strings.Join(cidrs, ", ") +
			" (" + setting + "); host names cannot be allowed by name, so terminal.egress_allow is not available here"}
}

// EgressReporter is implemented by backends that can say what they enforce about egress.
// A backend without it enforces nothing: EgressNotAvailable.
type EgressReporter interface {
	Egress() EgressReport
}

// EgressEvent is one outbound connection a backend's proxy allowed or refused.
type EgressEvent struct {
	Session   string
	Backend   string
	Method    string // CONNECT, GET, …
	Host      string
	Port      int
	Decision  string // "allowed" or "denied"
	Reason    string
	Error     string
	BytesUp   int64
	BytesDown int64
	Duration  time.Duration
	// Change, when set, makes the event a change of the egress settings in force for the
	// session (an allowlist or brokered secret edited in the configuration while it ran),
	// seen by the proxy before its next decision: what changed, never a value.
	Change string
}

// EgressObserver is implemented by backends that see each outbound connection (docker with
// docker.network allowlist, kubernetes with kubernetes.network allowlist). The caller (the CLI, which holds the audit log) installs the
// function before opening sessions; it must be safe for concurrent use.
type EgressObserver interface {
	ObserveEgress(func(EgressEvent))
}
