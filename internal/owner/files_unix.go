//go:build unix

package owner

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// stdinIsDevNull reports whether r is an *os.File open on /dev/null.
func stdinIsDevNull(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok || f == nil {
		return false
	}
	var st, null syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
		return false
	}
	return syscall.Stat("/dev/null", &null) == nil && st.Rdev == null.Rdev
}

// PrivateDir makes dir (0700) or checks that it is this user's and closed to others.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR || int(st.Uid) != os.Getuid() {
		return fmt.Errorf("owner: %s is not a directory of this user's", dir)
	}
	if st.Mode&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}
