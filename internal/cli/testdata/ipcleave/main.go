//go:build linux

// Command ipcleave is the test's attacker for the warm pool: run in a sandbox, it leaves a
// System V shared memory segment, semaphore set and message queue, and a POSIX message queue
// (/dev/mqueue/carry), for a later task in the same container to find.
package main

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	const flags = unix.IPC_CREAT | 0o666
	if _, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, flags); err != nil {
		fail("shmget", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SEMGET, unix.IPC_PRIVATE, 1, flags); e != 0 {
		fail("semget", e)
	}
	if _, _, e := unix.Syscall(unix.SYS_MSGGET, unix.IPC_PRIVATE, flags, 0); e != 0 {
		fail("msgget", e)
	}
	name, err := unix.BytePtrFromString("carry")
	if err != nil {
		fail("mq name", err)
	}
	fd, _, e := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), unix.O_CREAT|unix.O_RDWR, 0o666, 0, 0, 0)
	if e != 0 {
		fail("mq_open", e)
	}
	unix.Close(int(fd))
	fmt.Println("ipc-left")
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "ipcleave: %s: %v\n", what, err)
	os.Exit(1)
}
