package daytona

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// TestBranchingClaimed: daytona claims branching and implements it.
func TestBranchingClaimed(t *testing.T) {
	var b any = &Backend{}
	if _, ok := b.(sandbox.Brancher); !ok {
		t.Fatal("daytona does not implement sandbox.Brancher")
	}
	if !(&Backend{}).Capabilities().Branching {
		t.Error("Capabilities().Branching is false")
	}
	if _, ok := b.(sandbox.NoBrancher); ok {
		t.Error("daytona still says why it does not branch (NoBranching)")
	}
}

// TestForkJobs: a fork, and a session restored from a snapshot, list none of the source's
// jobs, and the source's running job runs on.
func TestForkJobs(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), nil)
	removeAtEnd(t, b, "jobs", "jobs-fork", "jobs-restored")
	src := open(t, b, "jobs")
	run(t, src, "true")
	t.Run("Fork", func(t *testing.T) {
		sandboxtest.ForkJobs(t, b, src, "jobs-fork", true, func(ctx context.Context) error { return b.Fork(ctx, "jobs", "jobs-fork") })
	})
	t.Run("Restore", func(t *testing.T) {
		sandboxtest.ForkJobs(t, b, src, "jobs-restored", true, func(ctx context.Context) error {
			ref, err := b.Snapshot(ctx, "jobs")
			if err != nil {
				return err
			}
			t.Cleanup(func() { b.RemoveSnapshot(context.Background(), ref.ID) })
			return b.Restore(ctx, ref.ID, "jobs-restored")
		})
	})
}

// TestForkLabels: a fork carries the new session's labels, never its source's (the service
// clones the source's), and is listed as a session of its own; the source is started again.
func TestForkLabels(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), nil)
	removeAtEnd(t, b, "lab", "lab-fork")
	run(t, open(t, b, "lab"), "echo x > f")
	ctx := ctxT(t, 2*time.Minute)
	if err := b.Fork(ctx, "lab", "lab-fork"); err != nil {
		t.Fatal(err)
	}
	fk, err := b.api.get(ctx, b.sandboxName("lab-fork"))
	if err != nil || !b.ours(fk, "lab-fork") || fk.State != "started" {
		t.Errorf("the fork's sandbox = %+v, %v; want started, labelled for lab-fork", fk, err)
	}
	if st := f.state(b.sandboxName("lab")); st != "started" {
		t.Errorf("the source after Fork is %q; want started", st)
	}
	list, err := b.Sessions(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "lab" || list[1].Name != "lab-fork" {
		t.Errorf("Sessions() = %+v, %v; want lab and lab-fork", list, err)
	}
	if err := b.Fork(ctx, "lab", "lab-fork"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Fork onto an existing session = %v; want ErrExist", err)
	}
	if err := b.Fork(ctx, "nobody", "lab-other"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Fork of a session that does not exist = %v; want ErrNotFound", err)
	}
	if f.hasSession("lab-other") {
		t.Error("a failed fork left a sandbox behind")
	}
}

// TestSnapshotGC: gc removes snapshots older than terminal.snapshot_ttl, at Daytona and from
// the list, and keeps younger ones; a dry run removes nothing.
func TestSnapshotGC(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), nil)
	removeAtEnd(t, b, "old")
	run(t, open(t, b, "old"), "true")
	ctx := ctxT(t, 2*time.Minute)
	old, err := b.Snapshot(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	young, err := b.Snapshot(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.RemoveSnapshot(context.Background(), young.ID) })
	rec, ok := b.snapRecords().Lookup(old.ID)
	if !ok {
		t.Fatalf("snapshot %s not listed", old.ID)
	}
	rec.Created = time.Now().Add(-3 * time.Hour)
	b.snapRecords().Save(old.ID, rec)

	opts := sandbox.GCOptions{SnapshotTTL: time.Hour, DryRun: true}
	rep, err := b.Collect(ctx, opts)
	if err != nil || !removed(rep, old.ID) || removed(rep, young.ID) {
		t.Errorf("Collect(dry run) = %+v, %v; want only %s reported", rep, err, old.ID)
	}
	if _, err := b.api.getSnapshot(ctx, old.ID); err != nil {
		t.Errorf("a dry run removed snapshot %s: %v", old.ID, err)
	}
	opts.DryRun = false
	rep, err = b.Collect(ctx, opts)
	if err != nil || !removed(rep, old.ID) || removed(rep, young.ID) {
		t.Errorf("Collect() = %+v, %v; want only %s removed", rep, err, old.ID)
	}
	if _, ok := b.snapRecords().Lookup(old.ID); ok {
		t.Errorf("snapshot %s still listed after gc", old.ID)
	}
	if s, err := b.api.getSnapshot(ctx, old.ID); statusOf(err) != http.StatusNotFound && s.State != "removing" {
		t.Errorf("snapshot %s at Daytona after gc = %+v, %v; want it removed", old.ID, s, err)
	}
	if s, err := b.api.getSnapshot(ctx, young.ID); err != nil || s.State != "active" {
		t.Errorf("the younger snapshot after gc = %+v, %v; want it kept", s, err)
	}
}

func removed(rep sandbox.GCReport, name string) bool {
	for _, it := range rep.Removed {
		if it.Kind == "snapshot" && it.Name == name {
			return true
		}
	}
	return false
}

// hasSession reports whether the fake has a sandbox labelled for session.
func (f *fakeDaytona) hasSession(session string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.boxes {
		if b.labels[labelSession] == session {
			return true
		}
	}
	return false
}

// TestFakeSnapshotRules: the fake refuses what the contract says the service refuses, so the
// branching tests cannot pass on requests the real service would reject.
func TestFakeSnapshotRules(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), nil)
	removeAtEnd(t, b, "rules")
	run(t, open(t, b, "rules"), "true")
	ctx := ctxT(t, 2*time.Minute)
	sb, err := b.api.get(ctx, b.sandboxName("rules"))
	if err != nil {
		t.Fatal(err)
	}
	path := "/sandbox/" + sb.ID + "/snapshot"
	memory := map[string]any{"name": "rules-mem", "includeMemory": true}
	if err := b.api.call(ctx, http.MethodPost, path, false, memory, nil, nil); statusOf(err) != http.StatusBadRequest {
		t.Errorf("a memory snapshot of a container sandbox = %v; want 400", err)
	}
	if _, err := b.api.snapshotSandbox(ctx, sb.ID, "rules-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.api.snapshotSandbox(ctx, sb.ID, "rules-b"); statusOf(err) != http.StatusConflict {
		t.Errorf("a snapshot of a sandbox that is snapshotting = %v; want 409", err)
	}
	if _, err := b.settle(ctx, "test", sb.ID, "snapshotting"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.api.snapshotSandbox(ctx, sb.ID, "rules-a"); statusOf(err) != http.StatusConflict {
		t.Errorf("a snapshot whose name is taken = %v; want 409", err)
	}
	s, err := b.api.getSnapshot(ctx, "rules-a")
	if err != nil {
		t.Fatal(err)
	}
	if s.State == "pending" {
		_, err := b.api.create(ctx, createSandbox{Name: "rules-early", Snapshot: "rules-a", Labels: map[string]string{}, AutoStopInterval: 15, AutoDeleteInterval: -1})
		if statusOf(err) != http.StatusBadRequest {
			t.Errorf("a sandbox from a pending snapshot = %v; want 400", err)
		}
	}
	if _, err := b.snapshotActive(ctx, "rules-a"); err != nil {
		t.Fatal(err)
	}
	if err := b.api.removeSnapshot(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	_, err = b.api.create(ctx, createSandbox{Name: "rules-late", Snapshot: "rules-a", Labels: map[string]string{}, AutoStopInterval: 15, AutoDeleteInterval: -1})
	if statusOf(err) != http.StatusNotFound {
		t.Errorf("a sandbox from a removed snapshot = %v; want 404", err)
	}
	if _, err := b.api.fork(ctx, sb.ID, b.sandboxName("rules")); statusOf(err) != http.StatusConflict {
		t.Errorf("a fork onto a taken name = %v; want 409", err)
	}
}
