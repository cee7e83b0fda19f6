//go:build unix

package audit

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes a flock on f, exclusive or shared, waiting for as long as
// another process holds it. Waiting in the kernel rather than polling keeps
// contending processes fair: a process that appends in a loop cannot starve
// the others, because every unlock wakes the waiters.
func lockFile(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EINTR) {
			return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
	}
}

func unlockFile(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

// tryLockFile takes the exclusive flock on f if it is free.
func tryLockFile(f *os.File) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		case !errors.Is(err, unix.EINTR):
			return false, &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
	}
}
