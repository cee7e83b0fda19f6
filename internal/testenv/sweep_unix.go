//go:build unix

package testenv

import "syscall"

// processGone reports whether no process pid exists.
func processGone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }
