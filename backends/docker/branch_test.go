//go:build unix

package docker

import (
	"slices"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
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
