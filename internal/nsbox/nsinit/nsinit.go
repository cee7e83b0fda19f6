// Package nsinit is the first part of a local session's namespaces (package nsbox) that runs
// inside them: PID 1, which makes the mounts and the network what the layout says, starts the
// helper and reaps orphans. It imports nothing but the standard library and x/sys, so that
// its package initialisation, which takes over a re-executed binary, runs before the heavy
// packages of the binary are initialised.
package nsinit

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

// Layout is what a session's namespaces hide and how they reach out.
type Layout struct {
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
}

// Report says what a session's namespaces enforce, for doctor, sandbox_info and the first
// command's notice.
type Report struct {
	// Enforced are the protections in force, one short phrase each.
	Enforced []string `json:"enforced"`
	// Missing are the protections asked for that could not be enforced, with why.
	Missing []string `json:"missing,omitempty"`
}

// EnvRole tells this binary, re-executed, which part it plays: RoleInit, RoleProbe (both
// here) or RoleServer (package nsbox). Only nsbox and the init set it.
const EnvRole = "HERMES_SANDBOX_NSBOX"

// Roles.
const (
	RoleInit   = "init"
	RoleServer = "server"
	RoleProbe  = "probe"
)

// ServerSpec is what the init hands the helper it starts, on descriptor 4 (the listener is
// descriptor 3): the spec as the client gave it, and what the init could enforce.
type ServerSpec struct {
	Spec   []byte `json:"spec"`
	Report Report `json:"report"`
}

// OneLine folds s onto one line (an answer on the wire is one line).
func OneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}
