package audit

import (
	"errors"
	"os"

	"github.com/hermes-sandbox/hermes-sandbox/internal/flock"
)

// lockFile takes a lock on f, exclusive or shared, waiting for as long as another process
// holds it (LockFileEx, see package flock).
func lockFile(f *os.File, exclusive bool) error { return flock.LockFile(f, exclusive, true) }

func unlockFile(f *os.File) error { return flock.UnlockFile(f) }

// tryLockFile takes the exclusive lock on f if it is free.
func tryLockFile(f *os.File) (bool, error) {
	err := flock.LockFile(f, true, false)
	if errors.Is(err, flock.ErrBusy) {
		return false, nil
	}
	return err == nil, err
}
