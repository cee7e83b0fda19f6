// Package nsbox runs a local session's helper, and every command it starts, inside Linux
// namespaces of their own: a mount namespace where secrets (local.deny_read) and this tool's
// own files are replaced by empty read-only placeholders, a PID namespace where no process of
// the caller is visible, a minimal /dev, and, for network none or allowlist, a network
// namespace with nothing but loopback. Without root it nests them in an unprivileged user
// namespace that maps the user to themselves, so they keep access to their own files.
//
// A session's namespaces live as long as a container would: the first process that opens the
// session starts a small init (this binary, re-executed) as their PID 1, and every later
// process, the session owner included, reaches the helper inside through a private unix
// socket in the state directory, which no command can see. Background jobs outlive the
// process that started them, as on the host; the init exits once no client and no process
// is left inside.
package nsbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/nsbox/nsinit"
)

// Network is what a session's commands can reach.
type Network = nsinit.Network

// Networks.
const (
	NetworkHost      = nsinit.NetworkHost
	NetworkNone      = nsinit.NetworkNone
	NetworkAllowlist = nsinit.NetworkAllowlist
)

// Spec is what one session's namespaces enforce (the layout) and what the helpers inside
// enforce on their commands.
type Spec struct {
	nsinit.Layout
	// Confine is the Landlock write rules (and the rest of agent.Confinement) every helper
	// inside enforces on its commands.
	Confine *agent.Confinement `json:"confine,omitempty"`
}

// Helper is how one client's helper runs inside: each client brings its own (see
// agent.Options).
type Helper struct {
	Shell string   `json:"shell"`
	Env   []string `json:"env"`
	Cwd   string   `json:"cwd"`
}

// key names the namespaces a spec makes: a process with another spec (changed settings)
// gets namespaces of its own.
func (s Spec) key() string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// Report says what a session's namespaces enforce.
type Report = nsinit.Report
