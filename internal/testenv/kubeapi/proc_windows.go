package kubeapi

import (
	"os"
	"syscall"
)

// procAttr is nothing special on Windows, where the test kube-apiserver does not run.
func procAttr() *syscall.SysProcAttr { return nil }

// killGroup kills p (Windows has no process groups to signal).
func killGroup(p *os.Process) { _ = p.Kill() }

// processGone reports whether no process pid exists: on Windows, opening it fails.
func processGone(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	p.Release()
	return false
}
