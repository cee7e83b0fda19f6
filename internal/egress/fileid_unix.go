//go:build unix

package egress

import (
	"fmt"
	"os"
	"syscall"
)

// fileID is fi's device and inode: a file replaced by a rename is a new file.
func fileID(fi os.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	}
	return ""
}
