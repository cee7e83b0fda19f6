//go:build unix

package vercel

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
// then diverge; the source runs again after the snapshot that stopped it; a restore of an old
// snapshot does not see later changes; removing the snapshot or the source leaves the new
// sessions working.
func TestBranching(t *testing.T) {
	s := newSetup(t)
	b := s.backend(t, nil)
	ctx := ctxT(t, 5*time.Minute)
	open := func(name string) sandbox.Session {
		t.Helper()
		sess, err := b.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		return sess
	}
	src := open("src")
	run(t, src, "mkdir -p /vercel/sandbox/d && echo one > /vercel/sandbox/d/f && cd /vercel/sandbox/d && export BRANCH_VAR=kept")
	if err := b.Fork(ctx, "src", "fork"); err != nil {
		t.Fatalf("Fork: %v", err)
	}
	got, err := b.api.GetSandbox(ctx, b.sandboxName("src"), false)
	if err != nil || got.Session.Status != StatusRunning {
		t.Errorf("the source after Fork = %+v, %v; want it running again", got, err)
	}
	fork := open("fork")
	if res := run(t, fork, `printf '%s|%s|%s' "$PWD" "$BRANCH_VAR" "$(cat f)"`); res.Stdout != "/vercel/sandbox/d|kept|one" || res.EnvironmentRecreated {
		t.Errorf("fork sees %q (recreated %v); want /vercel/sandbox/d|kept|one", res.Stdout, res.EnvironmentRecreated)
	}
	run(t, fork, "echo fork > f")
	run(t, src, "echo src > f")
	if res := run(t, src, `cat f; echo "$BRANCH_VAR"`); res.Stdout != "src\nkept\n" {
		t.Errorf("source reads %q after both wrote; want src, kept", res.Stdout)
	}
	if res := run(t, fork, "cat f"); res.Stdout != "fork\n" {
		t.Errorf("fork reads %q after both wrote; want fork", res.Stdout)
	}

	ref, err := b.Snapshot(ctx, "src")
	if err != nil || ref.Session != "src" || !strings.HasPrefix(ref.ID, "snap_") || ref.Size <= 0 {
		t.Fatalf("Snapshot = %+v, %v; want a snap_ id of src with its size", ref, err)
	}
	run(t, src, "echo later > f")
	if err := b.Restore(ctx, ref.ID, "old"); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if err := b.Restore(ctx, ref.ID, "old"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Restore into an existing session = %v; want fs.ErrExist", err)
	}
	old := open("old")
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
	if list, _ := b.Snapshots(ctx); len(list) != 1 {
		t.Errorf("Snapshots after RemoveSnapshot = %+v; want the fork's only", list)
	}
	for _, id := range []string{ref.ID, "snap_nosuch", "../x"} {
		if err := b.RemoveSnapshot(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("RemoveSnapshot(%q) = %v; want ErrNotFound", id, err)
		}
		if err := b.Restore(ctx, id, "other"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Restore(%q) = %v; want ErrNotFound", id, err)
		}
	}
	// The restored session still resumes after its VM stops: the snapshot it resumes from
	// was kept on Vercel.
	got, err = b.api.GetSandbox(ctx, b.sandboxName("old"), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.api.StopSession(ctx, got.Session.ID); err != nil {
		t.Fatal(err)
	}
	if res := run(t, old, "cat f"); res.Stdout != "src\n" || res.EnvironmentRecreated {
		t.Errorf("restored session after RemoveSnapshot and a stop reads %q (recreated %v); want src", res.Stdout, res.EnvironmentRecreated)
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
// background jobs (its snapshot carries their records under the working directory, not their
// processes). The snapshot stops the source, so its running job ends there.
func TestForkJobs(t *testing.T) {
	s := newSetup(t)
	b := s.backend(t, nil)
	src, err := b.Open(ctxT(t, 5*time.Minute), "src")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	t.Run("Fork", func(t *testing.T) {
		sandboxtest.ForkJobs(t, b, src, "fork", false, func(ctx context.Context) error { return b.Fork(ctx, "src", "fork") })
	})
	t.Run("Restore", func(t *testing.T) {
		sandboxtest.ForkJobs(t, b, src, "restored", false, func(ctx context.Context) error {
			ref, err := b.Snapshot(ctx, "src")
			if err != nil {
				return err
			}
			return b.Restore(ctx, ref.ID, "restored")
		})
	})
}
