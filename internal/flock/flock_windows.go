package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// Windows has no flock: LockFileEx takes a byte-range lock, which is mandatory. The lock is
// on one byte far past the end of the file, so it excludes the other lockers without
// stopping anyone's reads and writes of the file's contents.
const (
	lockOffsetLow  = 0xFFFFFFFE
	lockOffsetHigh = 0x7FFFFFFF
)

// LockFile locks f, exclusively or shared; with wait false it fails at once with
// errBusy when another handle holds a conflicting lock.
func LockFile(f *os.File, exclusive, wait bool) error {
	var flags uint32
	if exclusive {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	if !wait {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	ol := &windows.Overlapped{Offset: lockOffsetLow, OffsetHigh: lockOffsetHigh}
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return ErrBusy
	}
	if err != nil {
		return &os.PathError{Op: "LockFileEx", Path: f.Name(), Err: err}
	}
	return nil
}

// UnlockFile releases LockFile's lock.
func UnlockFile(f *os.File) error {
	ol := &windows.Overlapped{Offset: lockOffsetLow, OffsetHigh: lockOffsetHigh}
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, ol)
}

// ErrBusy says another process holds the lock (LockFile without waiting).
var ErrBusy = errors.New("flock: the lock is held")

// Lock opens (creating) the lock file at path and waits for an exclusive lock on it. The
// returned function releases it.
func Lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := LockFile(f, true, true); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// LockContext is Lock that gives up with ctx's error when ctx ends first. It polls.
func LockContext(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	wait := time.Millisecond
	for {
		err := LockFile(f, true, false)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, ErrBusy) {
			f.Close()
			return nil, err
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
