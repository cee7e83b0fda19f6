//go:build unix && !linux

package kubeapi

import "syscall"

// procAttr puts a server in a process group of its own; there is no parent-death signal off
// Linux (the test kube-apiserver's binaries are Linux ones anyway).
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
