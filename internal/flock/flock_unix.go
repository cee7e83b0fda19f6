//go:build unix

// Package flock takes an exclusive advisory lock on a file, for read-modify-write cycles that
// several processes share (the gate's session store, the config file's allowlist).
package flock

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Lock opens (creating 0600) the lock file at path and waits for an exclusive flock on it.
// The returned function releases it.
func Lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	return func() { f.Close() }, nil
}
