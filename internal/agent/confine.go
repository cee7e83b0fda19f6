package agent

// Confinement is what the helper enforces on every command it starts, in the kernel where it
// can (Landlock on Linux): the Protect trees can be read but never changed, whatever path,
// link or rename a command uses.
type Confinement struct {
	// Protect are directories commands may read but never change (the tool's config and
	// state).
	Protect []string
	// Strict limits writes to the Writable trees (less Protect) and the session's scratch
	// directories. Without it, commands may write anywhere but Protect and the directories
	// on the way to it (those may gain no new entries).
	Strict   bool
	Writable []string
	// Required makes a confinement the kernel cannot enforce an error; otherwise the helper
	// runs unconfined and says so in its status.
	Required bool
	// NoUnixSockets refuses commands socket(AF_UNIX) (a seccomp filter), so none can connect
	// to a path socket of the host: the docker engine, a tmux or screen server, the D-Bus
	// session bus, an ssh-agent. socketpair(2) still works.
	NoUnixSockets bool `json:",omitempty"`
	// DropCaps takes from commands every capability that reaches past a mount namespace
	// (CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH, CAP_SYS_PTRACE, CAP_MKNOD, …), for a helper that
	// runs as root: what a root command keeps is docker's default set, less CAP_MKNOD and
	// CAP_NET_RAW.
	DropCaps bool `json:",omitempty"`
}

// ConfinementStatus says whether commands are confined, and how.
type ConfinementStatus struct {
	// Enforced is true when the kernel enforces the confinement.
	Enforced bool
	// Detail says how (Landlock ABI version) or why not.
	Detail string
}
