//go:build unix

package docker

import (
	"os"
	"syscall"
)

// fileID is a file's device and inode.
type fileID struct{ dev, ino uint64 }

// linkID identifies fi when it has more than one hard link, so a build context's hard links
// go into the tar as links.
func linkID(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink <= 1 {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true
}
