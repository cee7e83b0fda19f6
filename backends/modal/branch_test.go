//go:build unix

package modal

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// TestBranching: a fork has the source's files, working directory and exports, and the two
// then diverge; a restore of an old snapshot does not see later changes; removing the
// snapshot or the source leaves the new sessions working.
func TestBranching(t *testing.T) {
	f := newFake(t)
	b := newBackend(t, f, t.TempDir(), nil)
	ctx := ctxT(t, 5*time.Minute)
	src := open(t, b, "src")
	run(t, src, "mkdir -p /workspace/d && echo one > /workspace/d/f && cd /workspace/d && export BRANCH_VAR=kept")
	if err := b.Fork(ctx, "src", "fork"); err != nil {
		t.Fatalf("Fork: %v", err)
	}
	fork := open(t, b, "fork")
	if res := run(t, fork, `printf '%s|%s|%s' "$PWD" "$BRANCH_VAR" "$(cat f)"`); res.Stdout != "/workspace/d|kept|one" || res.EnvironmentRecreated {
		t.Errorf("fork sees %q (recreated %v); want /workspace/d|kept|one", res.Stdout, res.EnvironmentRecreated)
	}
	run(t, fork, "echo fork > f")
	run(t, src, "echo src > f")
	if res := run(t, src, "cat f"); res.Stdout != "src\n" {
		t.Errorf("source reads %q after both wrote; want src", res.Stdout)
	}
	if res := run(t, fork, "cat f"); res.Stdout != "fork\n" {
		t.Errorf("fork reads %q after both wrote; want fork", res.Stdout)
	}

	ref, err := b.Snapshot(ctx, "src")
	if err != nil || ref.Session != "src" || !strings.HasPrefix(ref.ID, "im-") {
		t.Fatalf("Snapshot = %+v, %v", ref, err)
	}
	run(t, src, "echo later > f")
	if err := b.Restore(ctx, ref.ID, "old"); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if err := b.Restore(ctx, ref.ID, "old"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Restore into an existing session = %v; want fs.ErrExist", err)
	}
	old := open(t, b, "old")
	if res := run(t, old, `cat f; echo "$BRANCH_VAR"`); res.Stdout != "src\nkept\n" {
		t.Errorf("restored session reads %q; want the snapshot's src and kept", res.Stdout)
	}
	list, err := b.Snapshots(ctx)
	if err != nil || len(list) != 2 || list[1].ID != ref.ID {
		t.Fatalf("Snapshots = %+v, %v; want the fork's, then %s", list, err, ref.ID)
	}
	if err := b.RemoveSnapshot(ctx, ref.ID); err != nil {
		t.Fatalf("RemoveSnapshot: %v", err)
	}
	f.mu.Lock()
	_, kept := f.images[ref.ID]
	f.mu.Unlock()
	if kept {
		t.Errorf("RemoveSnapshot left image %s on the service", ref.ID)
	}
	for _, id := range []string{ref.ID, "im-nosuchimage", "../x"} {
		if err := b.RemoveSnapshot(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("RemoveSnapshot(%q) = %v; want ErrNotFound", id, err)
		}
		if err := b.Restore(ctx, id, "other"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Restore(%q) = %v; want ErrNotFound", id, err)
		}
	}
	if res := run(t, old, "cat f"); res.Stdout != "src\n" {
		t.Errorf("restored session after RemoveSnapshot reads %q; want src", res.Stdout)
	}
	if err := b.Remove(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if res := run(t, fork, "cat f"); res.Stdout != "fork\n" || res.EnvironmentRecreated {
		t.Errorf("fork after the source's removal reads %q (recreated %v); want fork", res.Stdout, res.EnvironmentRecreated)
	}
	if err := b.Fork(ctx, "src", "again"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Fork of a removed session = %v; want ErrNotFound", err)
	}
}

// TestForkJobs: a fork, and a session restored from a snapshot, list none of the source's
// background jobs (its snapshot carries their records, not their processes), and the
// source's running job goes on.
func TestForkJobs(t *testing.T) {
	f := newFake(t)
	b := newBackend(t, f, t.TempDir(), nil)
	src := open(t, b, "src")
	t.Run("Fork", func(t *testing.T) {
		sandboxtest.ForkJobs(t, b, src, "fork", true, func(ctx context.Context) error { return b.Fork(ctx, "src", "fork") })
	})
	t.Run("Restore", func(t *testing.T) {
		sandboxtest.ForkJobs(t, b, src, "restored", true, func(ctx context.Context) error {
			ref, err := b.Snapshot(ctx, "src")
			if err != nil {
				return err
			}
			return b.Restore(ctx, ref.ID, "restored")
		})
	})
}
