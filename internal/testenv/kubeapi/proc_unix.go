//go:build unix

package kubeapi

import (
	"os"
	"syscall"
)

// killGroup kills p's process group.
func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }

// processGone reports whether no process pid exists.
func processGone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }
