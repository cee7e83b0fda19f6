package imagebuild

import (
	"io/fs"
	"syscall"
)

func inode(info fs.FileInfo) (ino uint64, nlink uint64, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Ino, uint64(st.Nlink), true
}
