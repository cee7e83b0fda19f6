//go:build unix

package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// resetState is the session state noted by the probe.
type resetState struct {
	mu    sync.Mutex
	fresh *savedState // guarded by mu; nil until the probe
}

func (s *Server) resetCall(id uint32, req CallRequest) {
	if req.Reset == nil {
		s.sendErr(id, KindInvalid, "reset: no request")
		return
	}
	rep, err := s.reset(*req.Reset)
	if err != nil {
		s.sendErrFrom(id, err)
		return
	}
	_ = s.send(tReply, id, rep)
}

// reset does what ResetRequest says. The order matters: processes first (nothing may write
// while files go), then IPC objects and files, then the saved state, then the check.
func (s *Server) reset(req ResetRequest) (ResetReply, error) {
	if err := inPoolContainer(); err != nil {
		return ResetReply{}, fmt.Errorf("reset: %w: %w", err, errInvalid)
	}
	s.resets.mu.Lock()
	defer s.resets.mu.Unlock()
	var rep ResetReply
	problem := func(format string, args ...any) { rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...)) }
	if req.Probe {
		if err := refuseTracing(); err != nil {
			problem("cannot keep commands from tracing the helper: %v", err)
		}
		for _, d := range req.Wipe {
			for _, e := range s.wipeEntries(d) {
				problem("%s holds %s in a fresh sandbox (the image's files): emptying it would not make it fresh", d, e)
			}
		}
		st := s.state
		st.mu.Lock()
		s.resets.fresh = &savedState{Cwd: Bytes(st.cwd), Env: toBytesMap(st.env), Known: slices.Clone(st.known)}
		st.mu.Unlock()
	}
	if s.resets.fresh == nil {
		return ResetReply{}, fmt.Errorf("reset: no probe noted this sandbox fresh: %w", errInvalid)
	}

	s.killRuns()
	// The killed commands are reaped by their own waits first (a few milliseconds), so that
	// the sweep below, which reaps what is left, does not take their exit from them.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		s.mu.Lock()
		n := len(s.runs)
		s.mu.Unlock()
		if n == 0 {
			break
		}
	}
	if left := killOthers(time.Now().Add(5 * time.Second)); len(left) > 0 {
		problem("processes that would not end: %v", left)
	}
	for _, p := range removeIPC() {
		problem("%s", p)
	}
	now := time.Now()
	for _, d := range req.Wipe {
		for _, e := range s.wipeEntries(d) {
			if err := removeTree(e); err != nil {
				problem("remove %s: %v", e, err)
			}
		}
		// A task could keep a few bits in the directory's own times, if it owns it (a
		// directory it does not own, such as /dev/shm, only its owner can set to a chosen time).
		if err := os.Chtimes(d, now, now); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrPermission) {
			problem("reset the times of %s: %v", d, err)
		}
	}
	// The helper's state directory: the saved state only (its lock file included), as the
	// fresh helper wrote it.
	if ents, err := os.ReadDir(s.opts.StateDir); err == nil {
		for _, e := range ents {
			if n := e.Name(); n != "state.json" && n != "state.json.lock" {
				if err := removeTree(filepath.Join(s.opts.StateDir, n)); err != nil {
					problem("remove %s: %v", n, err)
				}
			}
		}
	}
	if err := s.restoreFresh(); err != nil {
		problem("restore the session state: %v", err)
	}
	rep.Fingerprint = fingerprint(req.Skip, func(p string) { problem("%s", p) })
	if left := otherProcesses(); len(left) > 0 {
		problem("processes left after the reset: %v", left)
	}
	for _, p := range listIPC() {
		problem("IPC object left after the reset: %s", p)
	}
	return rep, nil
}

// restoreFresh makes the session state the one the probe noted, on disk and here.
func (s *Server) restoreFresh() error {
	f := s.resets.fresh
	st := s.state
	unlock, err := st.lock()
	if err != nil {
		return err
	}
	defer unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.cwd, st.env, st.known = string(f.Cwd), fromBytesMap(f.Env), slices.Clone(f.Known)
	st.lastRaw = nil
	st.gen++
	return st.save()
}

// wipeEntries lists what d holds, the helper's state directory (and the directories on the
// way to it) apart: those stay, their other entries are listed.
func (s *Server) wipeEntries(d string) []string {
	var out []string
	state := filepath.Clean(s.opts.StateDir)
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			switch {
			case p == state:
			case strings.HasPrefix(state, p+"/") && e.IsDir() && e.Type()&os.ModeSymlink == 0:
				walk(p)
			default:
				out = append(out, p)
			}
		}
	}
	walk(filepath.Clean(d))
	return out
}

// removeTree removes p and everything under it, first giving this user the right to do so
// (a task may have left a directory without write or search permission for its owner).
func removeTree(p string) error {
	if os.RemoveAll(p) == nil {
		return nil
	}
	var open func(string)
	open = func(q string) {
		fi, err := os.Lstat(q)
		if err != nil || !fi.IsDir() {
			return
		}
		_ = os.Chmod(q, 0o700)
		ents, _ := os.ReadDir(q)
		for _, e := range ents {
			open(filepath.Join(q, e.Name()))
		}
	}
	open(p)
	return os.RemoveAll(p)
}
