package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// RunBranching runs only the Branching section, on the backend as it is: for a backend that
// wants it under settings of its own (a writable root filesystem, so that InstallDir exists)
// without running the whole suite again.
func RunBranching(t *testing.T, opts Options) {
	if opts.Scratch == "" {
		opts.Scratch = "/tmp"
	}
	if opts.Slow == 0 {
		opts.Slow = 1
	}
	run(t, opts, false, []check{{"Branching", (*suite).testBranching}})
}

// brancher returns the backend as a sandbox.Brancher when it claims Capabilities().Branching,
// fails the test when the claim and the interface disagree, and skips it when the backend
// does not branch. A gated backend implements Brancher whatever is behind it and must then
// answer ErrUnsupported.
func (s *suite) brancher(t *testing.T) sandbox.Brancher {
	t.Helper()
	br, ok := s.b.(sandbox.Brancher)
	if !s.b.Capabilities().Branching {
		if ok {
			if _, err := br.Snapshots(s.ctx(t)); !errors.Is(err, sandbox.ErrUnsupported) {
				t.Errorf("Snapshots() on a backend without Branching = %v; want ErrUnsupported", err)
			}
			if err := br.Fork(s.ctx(t), "conf-no-such-source", "conf-no-such-fork"); !errors.Is(err, sandbox.ErrUnsupported) {
				t.Errorf("Fork() on a backend without Branching = %v; want ErrUnsupported", err)
			}
		}
		t.Skip("backend does not branch (Capabilities().Branching is false)")
	}
	if !ok {
		t.Fatalf("Capabilities().Branching is true but the backend (%T) does not implement sandbox.Brancher", s.b)
	}
	return br
}

// branchName is a fresh session name derived from a session of the test.
func branchName(base, what string) string {
	return base + "-" + what + "-" + sandbox.RandomHex(2)
}

// dropLater removes session name (made by Restore or Fork, so not by s.open) when the test
// ends, whatever happened to it.
func (s *suite) dropLater(t *testing.T, name string) {
	t.Cleanup(func() {
		if m, ok := s.b.(sandbox.SessionManager); ok {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(context.Background()), 60*time.Second*s.opts.Slow)
			defer cancel()
			_ = m.Remove(ctx, name)
		}
	})
}

// dropSnapshotLater removes a snapshot when the test ends, if the test has not.
func (s *suite) dropSnapshotLater(t *testing.T, br sandbox.Brancher, id string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(context.Background()), 60*time.Second*s.opts.Slow)
		defer cancel()
		if err := br.RemoveSnapshot(ctx, id); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("RemoveSnapshot(%q) in cleanup = %v", id, err)
		}
	})
}

// branchDir makes a directory of the test's own in the place the backend carries into a
// fork (Options.BranchDir, else the session's starting directory), cds into it and returns it.
func (s *suite) branchDir(t *testing.T, sess sandbox.Session) string {
	t.Helper()
	base := s.opts.BranchDir
	if base == "" {
		res := s.sh(t, sess, "pwd")
		base = strings.TrimSpace(res.Stdout)
		if res.ExitCode != 0 || !strings.HasPrefix(base, "/") {
			t.Fatalf("the session's starting directory: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	dir := strings.TrimSuffix(base, "/") + "/hermes-branch-" + sandbox.RandomHex(4)
	if res := s.sh(t, sess, fmt.Sprintf("mkdir -p '%s' && cd '%s'", dir, dir)); res.ExitCode != 0 {
		t.Fatalf("mkdir %s: exit %d %q", dir, res.ExitCode, res.Stderr)
	}
	return dir
}

// install puts an executable program into Options.InstallDir, as a package manager would,
// and returns its name ("" when the backend names no such directory). The source must run
// it by name first, so a missing PATH entry fails here, not in the fork.
func (s *suite) install(t *testing.T, sess sandbox.Session) string {
	t.Helper()
	if s.opts.InstallDir == "" {
		return ""
	}
	prog := "hermes-installed-" + marker("install")
	res := s.sh(t, sess, fmt.Sprintf(`mkdir -p '%[1]s' && printf '#!/bin/sh\necho installed-ok\n' > '%[1]s/%[2]s' && chmod 755 '%[1]s/%[2]s' && %[2]s`,
		s.opts.InstallDir, prog))
	if res.ExitCode != 0 || res.Stdout != "installed-ok\n" {
		t.Fatalf("installing %s into %s (Options.InstallDir, which must be on PATH) = exit %d %q %q",
			prog, s.opts.InstallDir, res.ExitCode, res.Stdout, res.Stderr)
	}
	return prog
}

// ownDir is out with its first line, the directory a fork or restored session shows for the
// source's dir, put back to dir where the backend gives such sessions a directory of their
// own (Options.BranchOwnDir) and that line names another directory of the same name.
func (s *suite) ownDir(out, dir string) string {
	first, rest, more := strings.Cut(out, "\n")
	if s.opts.BranchOwnDir == "" || first == dir || !strings.HasSuffix(first, dir[strings.LastIndex(dir, "/"):]) {
		return out
	}
	if !more {
		return dir
	}
	return dir + "\n" + rest
}

func (s *suite) testBranching(t *testing.T) {
	br := s.brancher(t)
	for _, c := range []struct {
		name string
		fn   func(*testing.T, sandbox.Brancher)
	}{
		{"ForkCarriesState", s.testForkCarries},
		{"ForkIndependent", s.testForkIndependent},
		{"RestoreOldSnapshot", s.testRestoreOld},
		{"ForkBusySource", s.testForkBusy},
		{"SourceRemoved", s.testForkSourceRemoved},
	} {
		t.Run(c.name, func(t *testing.T) {
			if s.opts.Parallel {
				t.Parallel()
			}
			c.fn(t, br)
		})
	}
}

// fork forks src into a new session of the test and opens it.
func (s *suite) fork(t *testing.T, br sandbox.Brancher, src sandbox.Session) sandbox.Session {
	t.Helper()
	name := branchName(src.Name(), "fork")
	s.dropLater(t, name)
	start := time.Now()
	if err := br.Fork(s.ctx(t), src.Name(), name); err != nil {
		t.Fatalf("%s: Fork(%q, %q) = %v", s.name(), src.Name(), name, err)
	}
	t.Logf("%s: Fork took %v", s.name(), time.Since(start).Round(time.Millisecond))
	return s.open(t, s.b, name)
}

// testForkCarries: files, the working directory, exported variables (hostile ones too) and an
// installed program of the source are in the fork.
func (s *suite) testForkCarries(t *testing.T, br sandbox.Brancher) {
	src := s.newSession(t)
	dir := s.branchDir(t, src)
	s.sh(t, src, `printf 'data\n\000\377' > f && mkdir -p sub && echo deep > sub/g && export HERMES_BR='x y' HERMES_Q="it's
two"; HERMES_LOCAL=1`)
	prog := s.install(t, src)
	// od is in POSIX and busybox (cksum is not in every busybox build).
	sum := s.sh(t, src, "od -An -tx1 f | tr -d ' \n'; echo").Stdout
	if want := "646174610a00ff\n"; sum != want {
		t.Fatalf("od of the source's file = %q; want %q", sum, want)
	}
	fk := s.fork(t, br, src)
	res := s.sh(t, fk, `pwd; printf '%s|%s|%s\n' "$HERMES_BR" "$HERMES_Q" "${HERMES_LOCAL-unset}"; od -An -tx1 f | tr -d ' \n'; echo; cat sub/g`)
	want := dir + "\nx y|it's\ntwo|unset\n" + sum + "deep\n"
	if res.ExitCode != 0 || s.ownDir(res.Stdout, dir) != want {
		t.Errorf("%s: in the fork, pwd, variables and files = exit %d %q; want %q", s.name(), res.ExitCode, res.Stdout, want)
	}
	if s.ownDir(res.Cwd, dir) != dir {
		t.Errorf("the fork's Result.Cwd = %q; want %q", res.Cwd, dir)
	}
	if prog != "" {
		if res := s.sh(t, fk, prog); res.ExitCode != 0 || res.Stdout != "installed-ok\n" {
			t.Errorf("%s: the program installed in %s before the fork, run in the fork = exit %d %q %q; want installed-ok",
				s.name(), s.opts.InstallDir, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	// The source is as it was.
	if res := s.sh(t, src, `pwd; cat sub/g; echo "$HERMES_BR"`); res.Stdout != dir+"\ndeep\nx y\n" {
		t.Errorf("the source after the fork = %q; want %q", res.Stdout, dir+"\ndeep\nx y\n")
	}
}

// testForkIndependent: what the fork changes (files, installed programs, variables) does not
// reach the source, and what the source changes afterwards does not reach the fork.
func (s *suite) testForkIndependent(t *testing.T, br sandbox.Brancher) {
	src := s.newSession(t)
	s.branchDir(t, src)
	s.sh(t, src, "echo base > f && export HERMES_SIDE=source")
	prog := s.install(t, src)
	fk := s.fork(t, br, src)
	// Each side first proves it can see its own change, then that the other cannot.
	forkSide := "echo fork > f && echo forkonly > g && export HERMES_SIDE=fork"
	if prog != "" {
		forkSide += fmt.Sprintf(" && rm -f '%s/%s'", s.opts.InstallDir, prog)
	}
	s.sh(t, fk, forkSide)
	s.sh(t, src, "echo srconly > h && rm -f missing-ok")
	if res := s.sh(t, fk, `cat f g; echo "$HERMES_SIDE"`); res.Stdout != "fork\nforkonly\nfork\n" {
		t.Fatalf("the fork does not see its own changes: %q", res.Stdout)
	}
	res := s.sh(t, src, `cat f; [ -e g ] && echo leaked-g; echo "$HERMES_SIDE"; cat h`)
	if want := "base\nsource\nsrconly\n"; res.Stdout != want {
		t.Errorf("%s: changes in the fork reached the source: the source shows %q; want %q", s.name(), res.Stdout, want)
	}
	if res := s.sh(t, fk, `[ -e h ] && echo leaked-h; true`); res.Stdout != "" {
		t.Errorf("%s: a file the source wrote after the fork is in the fork: %q", s.name(), res.Stdout)
	}
	if prog != "" {
		if res := s.sh(t, src, prog); res.Stdout != "installed-ok\n" {
			t.Errorf("%s: removing the installed program in the fork removed it from the source: %q %q", s.name(), res.Stdout, res.Stderr)
		}
	}
}

// testRestoreOld: a snapshot is listed, a session restored from it has the files and state of
// the moment it was taken (not later ones), restoring onto an existing name is refused and
// leaves that session alone, and a removed snapshot is gone while its restored session works.
func (s *suite) testRestoreOld(t *testing.T, br sandbox.Brancher) {
	src := s.newSession(t)
	dir := s.branchDir(t, src)
	s.sh(t, src, "echo v1 > f && export HERMES_V=one")
	snap, err := br.Snapshot(s.ctx(t), src.Name())
	if err != nil {
		t.Fatalf("%s: Snapshot(%q) = %v", s.name(), src.Name(), err)
	}
	s.dropSnapshotLater(t, br, snap.ID)
	if snap.ID == "" || snap.Session != src.Name() || snap.Backend != s.b.Name() {
		t.Errorf("Snapshot() = %+v; want an id, session %q, backend %q", snap, src.Name(), s.b.Name())
	}
	s.sh(t, src, "echo v2 > f && echo later > l && export HERMES_V=two && cd /")
	list, err := br.Snapshots(s.ctx(t))
	if err != nil {
		t.Fatalf("Snapshots() = %v", err)
	}
	if i := slices.IndexFunc(list, func(r sandbox.SnapshotRef) bool { return r.ID == snap.ID }); i < 0 {
		t.Errorf("Snapshots() = %+v; want it to list %q", list, snap.ID)
	} else if list[i].Session != src.Name() {
		t.Errorf("Snapshots() lists %q with session %q; want %q", snap.ID, list[i].Session, src.Name())
	}

	if err := br.Restore(s.ctx(t), snap.ID, src.Name()); err == nil {
		t.Errorf("%s: Restore(%q) onto the existing session %q succeeded; want an error", s.name(), snap.ID, src.Name())
	}
	if res := s.sh(t, src, `cat `+dir+`/f; echo "$HERMES_V"; pwd`); res.Stdout != "v2\ntwo\n/\n" {
		t.Errorf("%s: the session a refused Restore named changed: %q; want %q", s.name(), res.Stdout, "v2\ntwo\n/\n")
	}

	name := branchName(src.Name(), "restored")
	s.dropLater(t, name)
	if err := br.Restore(s.ctx(t), snap.ID, name); err != nil {
		t.Fatalf("%s: Restore(%q, %q) = %v", s.name(), snap.ID, name, err)
	}
	rs := s.open(t, s.b, name)
	res := s.sh(t, rs, `pwd; cat f; echo "$HERMES_V"; [ -e l ] && echo later-leaked; true`)
	if want := dir + "\nv1\none\n"; s.ownDir(res.Stdout, dir) != want {
		t.Errorf("%s: the session restored from the old snapshot = %q; want %q (the state when it was taken)", s.name(), res.Stdout, want)
	}

	if err := br.RemoveSnapshot(s.ctx(t), snap.ID); err != nil {
		t.Fatalf("RemoveSnapshot(%q) = %v", snap.ID, err)
	}
	list, err = br.Snapshots(s.ctx(t))
	if err != nil {
		t.Fatalf("Snapshots() after RemoveSnapshot = %v", err)
	}
	if slices.ContainsFunc(list, func(r sandbox.SnapshotRef) bool { return r.ID == snap.ID }) {
		t.Errorf("Snapshots() still lists %q after RemoveSnapshot", snap.ID)
	}
	if err := br.RemoveSnapshot(s.ctx(t), snap.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("RemoveSnapshot(removed %q) = %v; want ErrNotFound", snap.ID, err)
	}
	other := branchName(src.Name(), "gone")
	s.dropLater(t, other)
	if err := br.Restore(s.ctx(t), snap.ID, other); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Restore(removed %q) = %v; want ErrNotFound", snap.ID, err)
	}
	if res := s.sh(t, rs, "cat f; echo more >> f; cat f"); res.Stdout != "v1\nv1\nmore\n" {
		t.Errorf("%s: the restored session after its snapshot was removed = %q", s.name(), res.Stdout)
	}
	if _, err := br.Snapshot(s.ctx(t), branchName(src.Name(), "never-opened")); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Snapshot(a session that does not exist) = %v; want ErrNotFound", err)
	}
}

// testForkBusy: a session can be forked while a foreground command and a detached process run
// in it; the source's command goes on and finishes, its process keeps running, and neither
// is carried into the fork (running processes are not part of a snapshot).
func (s *suite) testForkBusy(t *testing.T, br sandbox.Brancher) {
	if s.opts.ForkStopsSource != "" {
		t.Skip(s.opts.ForkStopsSource)
	}
	src := s.newSession(t)
	dir := s.branchDir(t, src)
	s.canSeeProcesses(t, src)
	m := marker("busy")
	s.sh(t, src, "echo before > f; "+s.detached("9"+m, ">/dev/null 2>&1 </dev/null"))
	defer s.kill(t, src, "9"+m) // while the test's context lives (a Cleanup runs after it ends)
	s.waitLeftovers(t, src, "9"+m, 1, "running in the source")

	started := make(chan struct{})
	out := &signalWriter{want: "started", fn: func() { close(started) }}
	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		script := fmt.Sprintf(`echo started; i=0; while [ ! -e '%s/release' ]; do sleep 0.05; i=$((i+1)); [ $i -gt 1200 ] && exit 9; done; echo released`, dir)
		res, err := src.Exec(s.ctx(t), sandbox.Command{Script: script, Stdout: out})
		done <- outcome{res, err}
	}()
	defer wg.Wait()
	defer func() {
		// Whatever happened, let the long command end before the test does.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(context.Background()), 30*time.Second*s.opts.Slow)
		defer cancel()
		src.Exec(ctx, sandbox.Command{Script: fmt.Sprintf("touch '%s/release'", dir)})
	}()
	select {
	case <-started:
	case o := <-done:
		t.Fatalf("the long command ended before the fork: %+v, %v", o.res, o.err)
	case <-time.After(60 * time.Second * s.opts.Slow):
		t.Fatal("the long command never started")
	}
	fk := s.fork(t, br, src)
	if res := s.sh(t, src, "touch release"); res.ExitCode != 0 {
		t.Errorf("touch release in the source: %q", res.Stderr)
	}
	o := <-done
	if o.err != nil || o.res.ExitCode != 0 || !strings.HasSuffix(o.res.Stdout, "released\n") {
		t.Errorf("%s: the source's command running during the fork = %+v, %v; want it released, exit 0", s.name(), o.res, o.err)
	}
	s.waitLeftovers(t, src, "9"+m, 1, "running in the source after the fork")
	if res := s.sh(t, fk, "cat f"); res.Stdout != "before\n" {
		t.Errorf("%s: the fork of a busy session: cat f = %q %q; want before", s.name(), res.Stdout, res.Stderr)
	}
	if s.opts.SharedProcesses != "" {
		t.Log("not checked: the fork carries no running process: " + s.opts.SharedProcesses)
		return
	}
	s.canSeeProcesses(t, fk)
	s.waitLeftovers(t, fk, "9"+m, 0, "in the fork (running processes are not carried)")
}

// testForkSourceRemoved: a fork works after its source session is removed.
func (s *suite) testForkSourceRemoved(t *testing.T, br sandbox.Brancher) {
	m, ok := s.b.(sandbox.SessionManager)
	if !ok {
		t.Skip("backend cannot remove sessions")
	}
	src := s.newSession(t)
	dir := s.branchDir(t, src)
	s.sh(t, src, "echo kept > f && export HERMES_K=kept")
	fk := s.fork(t, br, src)
	src.Close()
	if err := m.Remove(s.ctx(t), src.Name()); err != nil {
		t.Fatalf("Remove(%q) = %v", src.Name(), err)
	}
	res := s.sh(t, fk, `pwd; cat f; echo "$HERMES_K"; echo new > n; cat n`)
	if want := dir + "\nkept\nkept\nnew\n"; s.ownDir(res.Stdout, dir) != want {
		t.Errorf("%s: the fork after its source was removed = exit %d %q %q; want %q", s.name(), res.ExitCode, res.Stdout, res.Stderr, want)
	}
	// From a new process too: the fork is a session of its own, not a view of the source.
	if s.b.Capabilities().Persistent {
		fk.Close()
		b2 := s.opts.NewBackend(t)
		defer b2.Close()
		again, err := b2.Open(s.ctx(t), fk.Name())
		if err != nil {
			t.Fatalf("Open(%q) from a new backend = %v", fk.Name(), err)
		}
		defer again.Close()
		if res, err := s.exec(t, again, sandbox.Command{Script: "cat f n"}); err != nil || res.Stdout != "kept\nnew\n" {
			t.Errorf("the fork from a new backend: cat f n = %v, %v; want kept, new", res, err)
		}
	}
}
