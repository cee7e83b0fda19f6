package kubeapi

import "syscall"

// procAttr puts a server in a process group of its own that dies with the test process.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
