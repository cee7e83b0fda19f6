//go:build unix

package daemon

import (
	"os"
	"syscall"
)

// inode returns the inode of the file at p, which tells a socket from one put in its place.
func inode(p string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	return uint64(st.Ino), nil
}
