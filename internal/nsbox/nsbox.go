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
)

// Network is what a session's commands can reach.
type Network string

// Networks.
const (
	// NetworkHost shares this host's network.
	NetworkHost Network = "host"
	// NetworkNone gives commands a network namespace with loopback only.
	NetworkNone Network = "none"
	// NetworkAllowlist is NetworkNone plus a relay on 127.0.0.1:3128 that carries each
	// connection to the filtering proxy in the client's process.
	NetworkAllowlist Network = "allowlist"
)

// Spec is what one session's namespaces enforce and how its helper runs.
type Spec struct {
	// Session names the session in messages.
	Session string `json:"session"`
	// SockDir holds the sockets, locks and logs of the session inits (private, 0700).
	SockDir string `json:"sock_dir"`
	// StateDir is the session's own state directory: it stays visible and writable.
	StateDir string `json:"state_dir"`
	// Hide are this tool's directories (state, config, audit log, owners): inside, each is an
	// empty read-only directory (with the way to StateDir kept where it is below one).
	Hide []string `json:"hide"`
	// DenyRead are paths commands may neither read nor list: inside, an existing file is an
	// empty read-only file and a directory an empty one nobody can open.
	DenyRead []string `json:"deny_read"`
	// Network is the session's network.
	Network Network `json:"network"`
	// Keep are paths that must stay visible (the working directory): a Hide or DenyRead
	// entry that holds one is left alone and reported.
	Keep []string `json:"keep"`
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

// Report says what a session's namespaces enforce, for doctor, sandbox_info and the first
// command's notice.
type Report struct {
	// Enforced are the protections in force, one short phrase each.
	Enforced []string `json:"enforced"`
	// Missing are the protections asked for that could not be enforced, with why.
	Missing []string `json:"missing,omitempty"`
}
