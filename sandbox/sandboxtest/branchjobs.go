package sandboxtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// sandboxCleanup bounds each removal ForkJobs leaves for the end of the test.
const sandboxCleanup = time.Minute

// ForkJobs checks what a fork makes of the source's background jobs: none. src is an open
// session of b, whose ability to branch and run jobs the caller has checked; fork makes
// newName from it (b.Fork, or a Snapshot then Restore). The source gets a job that ended and
// one still running; the new session must list neither, must not find the running one by
// its id (so it cannot poll, wait on or kill the source's process), and must list its own
// job alone. When sourceRuns (the backend keeps the source running across a fork) the
// source's running job must still run afterwards, and it is killed at the end.
func ForkJobs(t *testing.T, b sandbox.Backend, src sandbox.Session, newName string, sourceRuns bool, fork func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	jr, ok := src.(sandbox.JobRunner)
	if !ok {
		t.Fatalf("the session (%T) runs no background jobs", src)
	}
	ended, err := jr.StartJob(ctx, sandbox.Command{Script: "echo ended"})
	if err != nil {
		t.Fatalf("StartJob(ended) = %v", err)
	}
	if out, err := jr.WaitJob(ctx, ended.ID); err != nil || out.Running {
		t.Fatalf("WaitJob(%s) = %+v, %v; want it ended", ended.ID, out, err)
	}
	long, err := jr.StartJob(ctx, sandbox.Command{Script: "echo started; exec sleep 600"})
	if err != nil {
		t.Fatalf("StartJob(long) = %v", err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sandboxCleanup)
		defer cancel()
		jr.KillJob(cctx, long.ID)
	})
	if err := fork(ctx); err != nil {
		t.Fatalf("fork into %s = %v", newName, err)
	}
	t.Cleanup(func() {
		if m, ok := b.(sandbox.SessionManager); ok {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sandboxCleanup)
			defer cancel()
			m.Remove(cctx, newName)
		}
	})
	fk, err := b.Open(ctx, newName)
	if err != nil {
		t.Fatalf("Open(%q) = %v", newName, err)
	}
	defer fk.Close()
	fjr := fk.(sandbox.JobRunner)
	if list, err := fjr.Jobs(ctx); err != nil || len(list) != 0 {
		t.Errorf("Jobs() in the fork = %+v, %v; want none (background jobs of the source are not carried)", list, err)
	}
	for _, id := range []string{ended.ID, long.ID} {
		if out, err := fjr.PollJob(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("PollJob(%s, a job of the source) in the fork = %+v, %v; want ErrNotFound", id, out, err)
		}
	}
	if st, err := fjr.KillJob(ctx, long.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("KillJob(%s, the source's running job) in the fork = %+v, %v; want ErrNotFound", long.ID, st, err)
	}
	own, err := fjr.StartJob(ctx, sandbox.Command{Script: "echo own"})
	if err != nil {
		t.Fatalf("StartJob in the fork = %v", err)
	}
	if _, err := fjr.WaitJob(ctx, own.ID); err != nil {
		t.Fatalf("WaitJob(%s) in the fork = %v", own.ID, err)
	}
	if list, err := fjr.Jobs(ctx); err != nil || len(list) != 1 || list[0].ID != own.ID {
		t.Errorf("Jobs() in the fork after its own job = %+v, %v; want %s alone", list, err, own.ID)
	}
	list, err := jr.Jobs(ctx)
	if err != nil {
		t.Fatalf("Jobs() in the source = %v", err)
	}
	seen := map[string]sandbox.JobStatus{}
	for _, j := range list {
		seen[j.ID] = j
	}
	if _, ok := seen[ended.ID]; !ok {
		t.Errorf("Jobs() in the source after the fork = %+v; want it to keep %s", list, ended.ID)
	}
	if _, ok := seen[own.ID]; ok {
		t.Errorf("Jobs() in the source = %+v; the fork's job %s is listed", list, own.ID)
	}
	if j, ok := seen[long.ID]; !ok || (sourceRuns && !j.Running) {
		t.Errorf("Jobs() in the source after the fork = %+v; want %s listed (running: %v)", list, long.ID, sourceRuns)
	}
}
