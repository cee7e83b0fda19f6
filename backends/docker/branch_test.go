//go:build unix

package docker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// TestSnapshotTTL: gc keeps snapshots with terminal.snapshot_ttl 0 or younger than it, reports
// older ones on a dry run without removing them, and removes them on a real one.
func TestSnapshotTTL(t *testing.T) {
	be := newBackend(t, nil)
	sess := open(t, be, "ttl")
	run(t, sess, "echo x > /workspace/f")
	ctx := ctxT(t, 5*time.Minute)
	snap, err := be.Snapshot(ctx, "ttl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.RemoveSnapshot(ctxT(t, time.Minute), snap.ID) })
	listed := func() bool {
		list, err := be.Snapshots(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(list, func(r sandbox.SnapshotRef) bool { return r.ID == snap.ID })
	}
	removed := func(rep sandbox.GCReport) bool {
		return slices.ContainsFunc(rep.Removed, func(it sandbox.GCItem) bool { return it.Kind == "snapshot" && it.Name == snap.ID })
	}
	for _, c := range []struct {
		ttl    time.Duration
		dry    bool
		report bool
		kept   bool
	}{
		{0, false, false, true},
		{time.Hour, false, false, true},
		{time.Nanosecond, true, true, true},
		{time.Nanosecond, false, true, false},
	} {
		rep, err := be.Collect(ctx, sandbox.GCOptions{SnapshotTTL: c.ttl, DryRun: c.dry})
		if err != nil {
			t.Fatalf("Collect(ttl %v, dry %v) = %v", c.ttl, c.dry, err)
		}
		if removed(rep) != c.report || listed() != c.kept {
			t.Errorf("Collect(ttl %v, dry %v): reported %v, still listed %v; want %v, %v (%+v)", c.ttl, c.dry, removed(rep), listed(), c.report, c.kept, rep)
		}
	}
	// The session itself is idle only for a moment: gc left it alone.
	if res := run(t, sess, "cat /workspace/f"); res.Stdout != "x\n" {
		t.Errorf("the session after gc: %q", res.Stdout)
	}
}

// TestForkJobs: a fork, and a session restored from a snapshot, list none of the source's
// background jobs, and the source's running job goes on.
func TestForkJobs(t *testing.T) {
	be := newBackend(t, nil)
	src := open(t, be, "jobs")
	t.Run("Fork", func(t *testing.T) {
		sandboxtest.ForkJobs(t, be, src, "jobs-fork", true, func(ctx context.Context) error { return be.Fork(ctx, "jobs", "jobs-fork") })
	})
	t.Run("Restore", func(t *testing.T) {
		sandboxtest.ForkJobs(t, be, src, "jobs-restored", true, func(ctx context.Context) error {
			ref, err := be.Snapshot(ctx, "jobs")
			if err != nil {
				return err
			}
			t.Cleanup(func() { be.RemoveSnapshot(context.Background(), ref.ID) })
			return be.Restore(ctx, ref.ID, "jobs-restored")
		})
	})
}

// TestGCForkImage: a fork of a session with a writable root runs from a commit that no
// reference names. gc keeps it while the fork's container uses it, and removes it once that
// container is gone without Remove having dropped it (removed by hand, or by a process that
// died first).
func TestGCForkImage(t *testing.T) {
	be := newBackend(t, func(c *config.Config) { c.Docker.ReadOnlyRootfs = false; c.Docker.User = "0:0" })
	ctx := ctxT(t, 5*time.Minute)
	run(t, open(t, be, "gcsrc"), "mkdir -p /usr/local && echo x > /usr/local/gc-x")
	if err := be.Fork(ctx, "gcsrc", "gcfork"); err != nil {
		t.Fatal(err)
	}
	info, err := be.inspect(ctx, be.containerName("gcfork"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := be.cli.ImageInspect(ctx, info.Image)
	if err != nil || img.Config == nil || img.Config.Labels[labelSnapshot] == "" || len(img.RepoTags) != 0 {
		t.Fatalf("the fork's image %s: %+v, %v; want an untagged snapshot commit", shortID(info.Image), img.RepoTags, err)
	}
	removed := func(rep sandbox.GCReport) bool {
		return slices.ContainsFunc(rep.Removed, func(it sandbox.GCItem) bool { return it.Kind == "image" && it.Name == shortID(img.ID) })
	}
	if rep, err := be.Collect(ctx, sandbox.GCOptions{}); err != nil || removed(rep) {
		t.Fatalf("Collect() while the fork uses its image = %+v, %v; want it kept", rep, err)
	}
	if res := run(t, open(t, be, "gcfork"), "cat /usr/local/gc-x"); res.Stdout != "x\n" {
		t.Fatalf("the fork after gc: %q %q", res.Stdout, res.Stderr)
	}
	if _, err := be.cli.ContainerRemove(ctx, info.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	rep, err := be.Collect(ctx, sandbox.GCOptions{})
	if err != nil || !removed(rep) {
		t.Errorf("Collect() once the fork's container is gone = %+v, %v; want image %s removed", rep, err, shortID(img.ID))
	}
	if _, err := be.cli.ImageInspect(ctx, img.ID); !isNotFound(err) {
		t.Errorf("ImageInspect(%s) after gc = %v; want not found", shortID(img.ID), err)
	}
}
