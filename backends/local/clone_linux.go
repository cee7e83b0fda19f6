package local

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// cloneFile makes dst share src's blocks (FICLONE: btrfs, XFS with reflink, bcachefs, …).
// errNoClone says the filesystem cannot, so the caller copies instead.
func cloneFile(dst, src *os.File) error {
	err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
	// EOPNOTSUPP/ENOTTY: no reflinks here (tmpfs, ext4); EXDEV: another filesystem;
	// EINVAL: this file cannot (a filesystem that clones only some files).
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EXDEV) ||
		errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return errNoClone
	}
	return err
}

// mkfifo recreates a named pipe.
func mkfifo(path string, mode os.FileMode) error { return unix.Mkfifo(path, uint32(mode.Perm())) }
