package sandboxtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// The wrappers that run a script in the session's shell keep the path they save its state to
// in the shell variable __hermes_st (a file, or the prefix of its files). A script that points
// it at a directory that does not exist makes the save fail the way a full or unwritable disk
// does, on every backend, without filling a disk.
const unwritableState = "__hermes_st=/nonexistent-hermes-dir/state"

// testExitTrap: a script that sets its own EXIT trap keeps its cd and export.
func (s *suite) testExitTrap(t *testing.T) {
	sess := s.newSession(t)
	dir := s.scratch("hermes trap dir")
	res := s.sh(t, sess, fmt.Sprintf("mkdir -p '%s'; trap 'echo bye' EXIT; cd '%s' && export HERMES_TRAPPED=kept", dir, dir))
	if res.Stdout != "bye\n" || res.ExitCode != 0 || res.StateNotSaved {
		t.Errorf("Exec(script with its own EXIT trap) = %d %q, state not saved %v (%s); want 0 %q and saved",
			res.ExitCode, res.Stdout, res.StateNotSaved, res.StateError, "bye\n")
	}
	res = s.sh(t, sess, `pwd; echo "${HERMES_TRAPPED-lost}"`)
	if want := dir + "\nkept\n"; res.Stdout != want {
		t.Errorf("after a script with its own EXIT trap: %q; want %q", res.Stdout, want)
	}
	// A script under set -u that leaves through exit keeps its state too.
	if res := s.sh(t, sess, "set -u; export HERMES_STRICT=kept; exit 4"); res.ExitCode != 4 || res.StateNotSaved {
		t.Errorf("Exec(set -u; export; exit 4) = exit %d, state not saved %v (%s); want 4, saved", res.ExitCode, res.StateNotSaved, res.StateError)
	}
	if res := s.sh(t, sess, `echo "${HERMES_STRICT-lost}"`); res.Stdout != "kept\n" {
		t.Errorf("after set -u and exit: %q; want kept", res.Stdout)
	}
	// Its trap still runs when it calls exit, and its exit code is kept.
	res = s.sh(t, sess, "trap 'echo bye2' EXIT; exit 3")
	if res.Stdout != "bye2\n" || res.ExitCode != 3 {
		t.Errorf("Exec(exit with a trap) = %d %q; want 3 %q", res.ExitCode, res.Stdout, "bye2\n")
	}
}

// testStateSaveFailure: a state that cannot be saved is reported, and the session keeps the
// state it had.
func (s *suite) testStateSaveFailure(t *testing.T) {
	sess := s.newSession(t)
	res := s.sh(t, sess, "export HERMES_SAVED=1")
	if res.StateNotSaved {
		t.Fatalf("Exec(export) reports its state not saved: %s", res.StateError)
	}
	// First prove the script's cd and export would have been kept, with the hook variable set
	// to where it already points.
	res = s.sh(t, sess, "cd / && export HERMES_SAVED=2; __hermes_st=$__hermes_st")
	if res.StateNotSaved {
		t.Fatalf("Exec(export, hook unchanged) reports its state not saved: %s", res.StateError)
	}
	if res := s.sh(t, sess, `echo "${HERMES_SAVED-gone}"`); res.Stdout != "2\n" {
		t.Fatalf("state after an ordinary save = %q; want %q", res.Stdout, "2\n")
	}
	res = s.sh(t, sess, fmt.Sprintf("cd '%s' && export HERMES_SAVED=3 HERMES_UNSAVED=1; %s", s.opts.Scratch, unwritableState))
	if !res.StateNotSaved || res.StateError == "" {
		t.Errorf("Exec(script whose state cannot be written) = state not saved %v, reason %q; want true and a reason", res.StateNotSaved, res.StateError)
	}
	if res.ExitCode != 0 {
		t.Errorf("Exec(script whose state cannot be written).ExitCode = %d; want the script's own 0", res.ExitCode)
	}
	res = s.sh(t, sess, `pwd; echo "${HERMES_SAVED-gone} ${HERMES_UNSAVED-unsaved}"`)
	if want := "/\n2 unsaved\n"; res.Stdout != want {
		t.Errorf("state after a failed save = %q; want the state from before it, %q", res.Stdout, want)
	}
	if res.StateNotSaved {
		t.Errorf("the command after a failed save reports its state not saved: %s", res.StateError)
	}
}

// testConcurrentExports: commands that overlap on one session, through one handle and
// through handles of other backends (as separate CLI processes would), each keep their
// export, and a cd is kept too.
func (s *suite) testConcurrentExports(t *testing.T) {
	if s.opts.StateSavedWhole != "" {
		t.Skip(s.opts.StateSavedWhole)
	}
	sess := s.newSession(t)
	s.sh(t, sess, "export HERMES_CE_BASE=1")
	const same, others = 8, 4
	handles := []sandbox.Session{sess}
	if s.b.Capabilities().Persistent {
		for i := 0; i < others; i++ {
			b2 := s.opts.NewBackend(t)
			t.Cleanup(func() { b2.Close() })
			h, err := b2.Open(s.ctx(t), sess.Name())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			handles = append(handles, h)
		}
	}
	n := same + len(handles) - 1
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		h := sess
		if i >= same {
			h = handles[i-same+1]
		}
		wg.Add(1)
		go func(i int, h sandbox.Session) {
			defer wg.Done()
			// The sleep makes the commands overlap: each starts from the same state.
			res, err := h.Exec(s.ctx(t), sandbox.Command{Script: fmt.Sprintf("sleep 0.3; export HERMES_CE_%d=v%d", i, i)})
			if err != nil {
				errs <- err
			} else if res.ExitCode != 0 || res.StateNotSaved {
				errs <- fmt.Errorf("export %d = exit %d, state not saved %v (%s)", i, res.ExitCode, res.StateNotSaved, res.StateError)
			}
		}(i, h)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	res := s.sh(t, sess, "env | grep '^HERMES_CE_' | sort")
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, fmt.Sprintf("HERMES_CE_%d=v%d", i, i))
	}
	want = append(want, "HERMES_CE_BASE=1")
	slices.Sort(want)
	if got := strings.Fields(res.Stdout); !slices.Equal(got, want) {
		t.Errorf("after %d overlapping exports the session has %q; want %q", n, got, want)
	}
	// A cd in one overlapping command and an export in another are both kept.
	dir := s.opts.Scratch
	var wg2 sync.WaitGroup
	for _, script := range []string{"sleep 0.3; cd " + dir, "sleep 0.3; export HERMES_CE_AFTER=1"} {
		wg2.Add(1)
		go func(script string) {
			defer wg2.Done()
			if _, err := sess.Exec(s.ctx(t), sandbox.Command{Script: script}); err != nil {
				t.Error(err)
			}
		}(script)
	}
	wg2.Wait()
	if res := s.sh(t, sess, `pwd; echo "${HERMES_CE_AFTER-lost}"`); res.Stdout != dir+"\n1\n" {
		t.Errorf("after an overlapping cd and export = %q; want %q", res.Stdout, dir+"\n1\n")
	}
}

// testConcurrentFirstUse: ten processes (here backends) that run the first command of the same
// new session at once all succeed, and share one sandbox: a file one of them writes is seen by
// all.
func (s *suite) testConcurrentFirstUse(t *testing.T) {
	if !s.b.Capabilities().Persistent {
		t.Skip("sessions do not outlive their process, so separate processes cannot share one")
	}
	sessionSeq.Lock()
	sessionSeq.n++
	name := fmt.Sprintf("conf-first-%d-%d", time.Now().UnixNano()%1_000_000, sessionSeq.n)
	sessionSeq.Unlock()
	const n = 10
	backends := make([]sandbox.Backend, n)
	for i := range backends {
		backends[i] = s.opts.NewBackend(t)
		t.Cleanup(func() { backends[i].Close() })
	}
	t.Cleanup(func() {
		if m, ok := s.b.(sandbox.SessionManager); ok {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(context.Background()), 60*time.Second)
			defer cancel()
			_ = m.Remove(ctx, name)
		}
	})
	marker := s.opts.Scratch + "/hermes-first-" + name
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, b := range backends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second*s.opts.Slow)
			defer cancel()
			sess, err := b.Open(ctx, name)
			if err != nil {
				errs <- fmt.Errorf("first use %d: Open = %v", i, err)
				return
			}
			defer sess.Close()
			res, err := sess.Exec(ctx, sandbox.Command{Script: fmt.Sprintf("echo %d >> %s", i, marker)})
			if err != nil || res.ExitCode != 0 {
				errs <- fmt.Errorf("first use %d: Exec = %+v, %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	sess := s.open(t, s.b, name)
	res := s.sh(t, sess, "sort -n "+marker+"; rm -f "+marker)
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, fmt.Sprint(i))
	}
	if got := strings.Fields(res.Stdout); !slices.Equal(got, want) {
		t.Errorf("the ten first uses wrote %q into one sandbox; want %q (each in the same sandbox)", got, want)
	}
}

// testCallerGone: when the process that started a foreground command goes away (here its
// backend is closed, which ends its stream to the sandbox as a killed process's would), the
// command's whole tree is killed; the session stays usable from another process.
func (s *suite) testCallerGone(t *testing.T) {
	if s.opts.CallerGoneSurvives != "" {
		t.Skip(s.opts.CallerGoneSurvives)
	}
	if !s.b.Capabilities().Persistent {
		t.Skip("sessions do not outlive their process, so no other process can watch")
	}
	sess := s.newSession(t)
	m := marker("caller")
	b2 := s.opts.NewBackend(t)
	sess2, err := b2.Open(s.ctx(t), sess.Name())
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sess2.Exec(context.Background(), sandbox.Command{Script: fmt.Sprintf("sleep 7%s & sleep 8%s; wait", m, m)})
	}()
	for deadline := time.Now().Add(30 * time.Second * s.opts.Slow); s.leftovers(t, sess, m) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
	}
	sess2.Close()
	b2.Close()
	s.canSeeProcesses(t, sess)
	s.waitLeftoversAfter(t, sess, m, 0, "still running after their caller went", s.opts.CallerGoneAfter)
	select {
	case <-ended:
	case <-time.After(30 * time.Second * s.opts.Slow):
		t.Error("Exec on the closed session did not return")
	}
}
