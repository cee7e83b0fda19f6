//go:build !linux && !windows

package local

import (
	"os"
	"syscall"
)

// cloneFile always says no: only Linux's FICLONE is used.
func cloneFile(dst, src *os.File) error { return errNoClone }

// mkfifo recreates a named pipe.
func mkfifo(path string, mode os.FileMode) error { return syscall.Mkfifo(path, uint32(mode.Perm())) }
