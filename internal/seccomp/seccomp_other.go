//go:build !linux

// Package seccomp installs a small seccomp-BPF filter on one OS thread, so that the commands
// started from that thread (and everything they start) cannot make the refused system calls.
package seccomp

import (
	"errors"
	"fmt"
	"runtime"
)

// Filter says what the filter refuses.
type Filter struct {
	// UnixSockets refuses socket(AF_UNIX, …) with EPERM: a confined command cannot connect to a path socket of the
	// host (docker.sock, tmux, ssh-agent, the D-Bus session bus). socketpair(2) stays allowed.
	UnixSockets bool
}

// Install refuses: seccomp is Linux-only.
func Install(Filter) error { return Available() }

// Available reports why seccomp filters do not work here.
func Available() error {
	return fmt.Errorf("seccomp filters are not available: seccomp is Linux-only, not %s: %w", runtime.GOOS,
		errors.ErrUnsupported)
}
