package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// testJobLimit: beyond Command.MaxJobs (terminal.max_jobs) running jobs, StartJob fails with
// ErrLimit and says which setting; a job that ends frees its place.
func (s *suite) testJobLimit(t *testing.T) {
	sess := s.newSession(t)
	jr := ability[sandbox.JobRunner](t, s.b.Capabilities().Jobs, sess, "background jobs")
	ctx := s.ctx(t)
	m := marker("jobcap")
	var started []string
	killAll := func() {
		for _, id := range started {
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second*s.opts.Slow)
			jr.KillJob(kctx, id)
			cancel()
		}
		started = nil
	}
	t.Cleanup(killAll)
	const limit = 3
	for i := range limit {
		st, err := jr.StartJob(ctx, sandbox.Command{Script: fmt.Sprintf("sleep 9%s", m), MaxJobs: limit})
		if err != nil {
			t.Fatalf("StartJob #%d with MaxJobs %d = %v; want it started", i+1, limit, err)
		}
		started = append(started, st.ID)
	}
	for deadline := time.Now().Add(20 * time.Second * s.opts.Slow); s.leftovers(t, sess, m) < limit; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the %d jobs were never seen running", limit)
		}
	}
	st, err := jr.StartJob(ctx, sandbox.Command{Script: "true", MaxJobs: limit})
	if err == nil {
		started = append(started, st.ID)
		t.Fatalf("StartJob #%d with MaxJobs %d = %+v; want ErrLimit", limit+1, limit, st)
	}
	if !errors.Is(err, sandbox.ErrLimit) || !strings.Contains(err.Error(), "terminal.max_jobs") {
		t.Errorf("StartJob beyond the limit = %v; want ErrLimit naming terminal.max_jobs", err)
	}
	// A job that ended frees its place.
	if _, err := jr.KillJob(ctx, started[0]); err != nil {
		t.Fatal(err)
	}
	started = started[1:]
	st, err = jr.StartJob(ctx, sandbox.Command{Script: "true", MaxJobs: limit})
	if err != nil {
		t.Errorf("StartJob after a job was killed = %v; want it started", err)
	} else {
		started = append(started, st.ID)
	}
	killAll()
	s.waitNoLeftovers(t, sess, m)
}

// testJobTimeout: a job still running at Command.JobTimeout (terminal.job_timeout) is killed
// with its process group and ends with exit code 124.
func (s *suite) testJobTimeout(t *testing.T) {
	sess := s.newSession(t)
	jr := ability[sandbox.JobRunner](t, s.b.Capabilities().Jobs, sess, "background jobs")
	ctx := s.ctx(t)
	m := marker("jobtime")
	limit := 3 * time.Second * s.opts.Slow
	start := time.Now()
	job, err := jr.StartJob(ctx, sandbox.Command{Script: fmt.Sprintf("echo ready; sleep 7%s & sleep 8%s; echo not-reached", m, m), JobTimeout: limit})
	if err != nil {
		t.Fatalf("StartJob = %v", err)
	}
	t.Cleanup(func() { jr.KillJob(context.WithoutCancel(ctx), job.ID) })
	// It runs: at least its two sleeps carry the marker (a helper's job shell may too). The
	// deadline is longer than the backend's slowest round trips.
	for deadline := time.Now().Add(limit); s.leftovers(t, sess, m) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job's processes were never seen running")
		}
	}
	out, err := jr.WaitJob(ctx, job.ID)
	if err != nil {
		t.Fatalf("WaitJob = %v", err)
	}
	if out.Running || out.ExitCode == nil || *out.ExitCode != sandbox.ExitTimeout || strings.Contains(out.Stdout, "not-reached") {
		t.Errorf("WaitJob after JobTimeout %s = running %v exit %v stdout %q; want ended with %d before its end", limit, out.Running, out.ExitCode, out.Stdout, sandbox.ExitTimeout)
	}
	if d := time.Since(start); d < limit {
		t.Errorf("the job ended after %s; want no sooner than its %s timeout", d, limit)
	}
	s.waitNoLeftovers(t, sess, m)
}
