//go:build unix

package mcpserver

import (
	"os"
	"syscall"
)

// statFile stamps a file so a change (an edit, or a rename over it) is noticed.
func statFile(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	st := fileStamp{exists: true, mod: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = uint64(sys.Ino)
	}
	return st
}
