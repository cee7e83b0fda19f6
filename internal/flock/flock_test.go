//go:build unix

package flock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestLockContext: a held lock makes LockContext wait until its context ends, with the
// context's error; once the lock is released, it is taken.
func TestLockContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "l")
	unlock, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if u, err := LockContext(ctx, p); !errors.Is(err, context.DeadlineExceeded) {
		if u != nil {
			u()
		}
		t.Fatalf("LockContext on a held lock = %v; want the deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := LockContext(t.Context(), p)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("LockContext after the release = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LockContext did not take the released lock")
	}
}
