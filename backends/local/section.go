// Package local runs commands on this host, as this user. With local.confine auto or strict
// on Linux, each session's helper and its commands run in namespaces of their own (package
// nsbox): secrets (local.deny_read) and this tool's files are unreadable, no process of the
// caller is visible, and with local.network none or allowlist the only network is loopback,
// plus this tool's filtering proxy for allowlist; Landlock keeps the write rules. On macOS
// the helper and its commands run under a Seatbelt profile of the session's instead
// (sandbox-exec; seatbelt.go, sandboxexec.go). With local.confine off, or where the kernel
// cannot, the helper runs in this process. Windows has no local sessions (WSL has).
package local

import (
	"fmt"
	"path/filepath"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Name is the backend's registry name.
const Name = "local"

// Section is the local backend's own configuration: local.confine, the directories of this
// tool's files besides the state directory (the config file's, the secrets file's and the
// audit log's, and the session owners' sockets, which the caller adds: a command that planted
// one would answer for the gate), which commands may not change and, in namespaces, cannot
// see, and the namespaces' network and deny-read paths. "~" is the caller's HOME.
type Section struct {
	Confine config.Confine
	Protect []string
	// Network is local.network as configured ("" = by Confine).
	Network config.LocalNetwork
	// EgressAllow is local.egress_allow.
	EgressAllow []string
	// DenyRead are the paths commands can neither read nor list (nil: the defaults).
	DenyRead []string
	// Secrets is this tool's secrets file, always denied.
	Secrets string

	// EgressResolver resolves the names the proxy allows (nil: the system's); tests map names
	// to local servers with it.
	EgressResolver egress.Resolver
	// EgressAllowLoopback lets allowed names resolve to this host's loopback (tests only).
	EgressAllowLoopback bool
	// BranchMaxBytes is local.branch_max_bytes (0 = config.DefaultBranchMaxBytes).
	BranchMaxBytes int64
	// Brokering is secrets.broker and the egress section (with local.network allowlist).
	Brokering egress.Brokering
	// SandboxExec runs each session's Seatbelt profile ("" = SandboxExec on macOS, none
	// elsewhere); tests elsewhere set a stand-in that records the profile and runs the helper.
	SandboxExec string
	// NoNamespaces runs the helper in this process with Landlock alone, as on a machine
	// without user namespaces (tests of that layer on its own).
	NoNamespaces bool
}

// SectionOf picks the local backend's section out of the whole configuration.
func SectionOf(c *config.Config) Section {
	s := Section{Confine: c.Local.Confine, Network: c.Local.Network, EgressAllow: c.Local.EgressAllow,
		DenyRead: c.Local.DenyRead, Secrets: c.SecretsPath(), BranchMaxBytes: c.Local.BranchMaxBytes.Bytes()}
	for _, p := range []string{c.Path(), c.SecretsPath(), c.Audit.LogDestination} {
		if p != "" {
			s.Protect = append(s.Protect, filepath.Dir(p))
		}
	}
	return s
}

// unsupported is why local sessions cannot run on goos (Windows): there is no shell, process
// group or confinement to run them with.
func unsupported(goos string) error {
	return fmt.Errorf("local: commands cannot run on this host: local sessions need a Unix shell and its processes, and this is %s; "+
		"run hermes-sandbox inside WSL (where local works as on Linux), or choose a backend that runs elsewhere: "+
		"docker (Docker Desktop: --backend docker, docker.host npipe:////./pipe/docker_engine), ssh, kubernetes, modal, daytona or vercel: %w",
		goos, sandbox.ErrUnavailable)
}
