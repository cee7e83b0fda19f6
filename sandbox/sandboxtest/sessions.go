package sandboxtest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Session integrity under concurrency and failure: every state change kept, one sandbox for
// simultaneous first uses, a caller's death kills its command, state saved despite the
// script's own EXIT trap, a failed save reported, and bounded background jobs.
func (s *suite) runSessionCases(t *testing.T) {
	t.Run("ConcurrentExportsAllKept", s.testConcurrentExports)
	t.Run("ConcurrentFirstUse", s.testConcurrentFirstUse)
	t.Run("CallerGoneKillsCommand", s.testCallerGone)
	t.Run("StateSurvivesScriptExitTrap", s.testExitTrap)
	t.Run("StateSaveFailureReported", s.testStateSaveFailure)
	t.Run("JobLimit", s.testJobLimit)
}

// envNames returns the sorted names of exported variables starting with prefix.
func (s *suite) envNames(t *testing.T, sess sandbox.Session, prefix string) []string {
	t.Helper()
	res := s.sh(t, sess, "env")
	var names []string
	for _, line := range strings.Split(res.Stdout, "\n") {
		if k, _, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, prefix) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}

func (s *suite) testConcurrentExports(t *testing.T) {
	sess := s.newSession(t)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A little work between reading and saving the state widens any lost-update window.
			script := fmt.Sprintf("export HERMES_ORD_%02d=%d; i=0; while [ $i -lt 20 ]; do i=$((i+1)); done", i, i)
			res, err := sess.Exec(s.ctx(t), sandbox.Command{Script: script})
			switch {
			case err != nil:
				errs <- err
			case res.ExitCode != 0 || res.StateNotSaved:
				errs <- fmt.Errorf("Exec(%q) = exit %d, state not saved %v", script, res.ExitCode, res.StateNotSaved)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := s.envNames(t, sess, "HERMES_ORD_"); len(got) != n {
		t.Errorf("after %d concurrent exports the session has %d of them: %v", n, len(got), got)
	}
}

func (s *suite) testConcurrentFirstUse(t *testing.T) {
	sessionSeq.Lock()
	sessionSeq.n++
	name := fmt.Sprintf("first-%d-%d", time.Now().UnixNano()%1_000_000, sessionSeq.n)
	sessionSeq.Unlock()
	// Ten "processes" (fresh backends) use a new session at the same moment.
	const n = 10
	file := fmt.Sprintf("%s/hermes-first-%s", s.opts.Scratch, name)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		b := s.opts.NewBackend(t)
		t.Cleanup(func() { b.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second*s.opts.Slow)
			defer cancel()
			sess, err := b.Open(ctx, name)
			if err != nil {
				errs <- fmt.Errorf("Open #%d = %v", i, err)
				return
			}
			defer sess.Close()
			res, err := sess.Exec(ctx, sandbox.Command{Script: fmt.Sprintf("echo %d >> '%s'", i, file)})
			if err != nil {
				errs <- fmt.Errorf("first Exec #%d = %v", i, err)
			} else if res.ExitCode != 0 {
				errs <- fmt.Errorf("first Exec #%d = exit %d: %s", i, res.ExitCode, res.Stderr)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	sess := s.open(t, s.b, name)
	res := s.sh(t, sess, fmt.Sprintf("sort -n '%s' | tr '\\n' ' '; rm -f '%s'", file, file))
	want := "0 1 2 3 4 5 6 7 8 9 "
	if res.Stdout != want {
		t.Errorf("the ten first uses wrote %q into one sandbox; want %q (one shared sandbox)", res.Stdout, want)
	}
}

func (s *suite) testCallerGone(t *testing.T) {
	sess := s.newSession(t)
	m := marker("caller")
	// Another "process" starts a long command in the same session, then goes away.
	b2 := s.opts.NewBackend(t)
	ctx := s.ctx(t)
	sess2, err := b2.Open(ctx, sess.Name())
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sess2.Exec(ctx, sandbox.Command{Script: fmt.Sprintf("sleep 7%s & sleep 8%s; wait", m, m)})
	}()
	deadline := time.Now().Add(30 * time.Second * s.opts.Slow)
	for s.leftovers(t, sess, m) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sess2.Close()
	b2.Close()
	s.waitNoLeftovers(t, sess, m)
	select {
	case <-ended:
	case <-time.After(20 * time.Second * s.opts.Slow):
		t.Error("Exec on the closed session did not return")
	}
}

func (s *suite) testExitTrap(t *testing.T) {
	sess := s.newSession(t)
	res := s.sh(t, sess, fmt.Sprintf("trap 'echo bye' EXIT; cd %s && export HERMES_TRAPPED=kept", s.opts.Scratch))
	if res.Stdout != "bye\n" || res.StateNotSaved {
		t.Errorf("script with its own EXIT trap = %q, state not saved %v; want bye and saved", res.Stdout, res.StateNotSaved)
	}
	res = s.sh(t, sess, `pwd; echo "${HERMES_TRAPPED-lost}"`)
	if want := s.opts.Scratch + "\nkept\n"; res.Stdout != want {
		t.Errorf("after a script with its own EXIT trap: %q; want %q", res.Stdout, want)
	}
	// Its trap still runs when it exits early, and exit codes are kept.
	res = s.sh(t, sess, "trap 'echo bye2' EXIT; export HERMES_TRAPPED=again; exit 3")
	if res.Stdout != "bye2\n" || res.ExitCode != 3 {
		t.Errorf("early exit with a trap = %d %q; want 3 bye2", res.ExitCode, res.Stdout)
	}
}

func (s *suite) testStateSaveFailure(t *testing.T) {
	sess := s.newSession(t)
	if res := s.sh(t, sess, "export HERMES_SAVED=1"); res.StateNotSaved {
		t.Fatalf("an ordinary export reports state not saved")
	}
	// The script points the helper's state file where nothing can be written, as a full disk
	// would refuse it.
	res := s.sh(t, sess, "cd / && export HERMES_UNSAVED=1; __hermes_st=/nonexistent-hermes-dir/state")
	if !res.StateNotSaved {
		t.Errorf("a script whose state could not be written reports it saved")
	}
	if res.ExitCode != 0 {
		t.Errorf("exit code = %d; want the script's own 0", res.ExitCode)
	}
	res = s.sh(t, sess, `echo "${HERMES_SAVED-gone} ${HERMES_UNSAVED-unsaved}"`)
	if res.Stdout != "1 unsaved\n" {
		t.Errorf("state after a failed save = %q; want the state from before it", res.Stdout)
	}
}

func (s *suite) testJobLimit(t *testing.T) {
	sess := s.newSession(t)
	jr, ok := sess.(sandbox.JobRunner)
	if !ok {
		t.Skip("backend has no background jobs")
	}
	ctx := s.ctx(t)
	m := marker("jobs")
	var started []string
	t.Cleanup(func() {
		for _, id := range started {
			jr.KillJob(context.Background(), id)
		}
	})
	const limit = 16 // terminal.max_jobs by default
	for i := range limit {
		st, err := jr.StartJob(ctx, sandbox.Command{Script: fmt.Sprintf("sleep 9%s", m)})
		if err != nil {
			t.Fatalf("StartJob #%d = %v; want %d jobs allowed", i+1, err, limit)
		}
		started = append(started, st.ID)
	}
	if st, err := jr.StartJob(ctx, sandbox.Command{Script: "true"}); err == nil {
		started = append(started, st.ID)
		t.Fatalf("StartJob #%d succeeded; want the max_jobs limit", limit+1)
	} else if !strings.Contains(err.Error(), "max_jobs") {
		t.Errorf("StartJob beyond the limit = %v; want an error naming terminal.max_jobs", err)
	}
	// A finished job frees its place.
	if _, err := jr.KillJob(ctx, started[0]); err != nil {
		t.Fatal(err)
	}
	st, err := jr.StartJob(ctx, sandbox.Command{Script: "true"})
	if err != nil {
		t.Errorf("StartJob after one ended = %v", err)
	} else {
		started = append(started, st.ID)
	}
	for _, id := range started {
		jr.KillJob(ctx, id)
	}
	started = nil
	s.waitNoLeftovers(t, sess, m)
}
