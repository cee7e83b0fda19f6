//go:build unix

// Package flock takes an exclusive advisory lock on a file, for read-modify-write cycles that
// several processes share (the gate's session store, the config file's allowlist).
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

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

// LockContext is Lock for a lock that may be held for long (a sandbox being started): it
// gives up with ctx's error when ctx ends first. It polls, since a blocked flock(2) cannot be
// interrupted.
func LockContext(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	wait := time.Millisecond
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, &os.PathError{Op: "flock", Path: path, Err: err}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("wait for the lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// ErrBusy says another process holds the lock (LockFile without waiting).
var ErrBusy = errors.New("flock: the lock is held")

// LockFile takes a flock on the open file f, exclusive or shared; with wait false it fails
// at once with ErrBusy when another holds a conflicting one. UnlockFile releases it.
func LockFile(f *os.File, exclusive, wait bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if !wait {
		how |= unix.LOCK_NB
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EWOULDBLOCK):
			return ErrBusy
		case !errors.Is(err, unix.EINTR):
			return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
	}
}

// UnlockFile releases LockFile's lock.
func UnlockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }
