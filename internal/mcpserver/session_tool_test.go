package mcpserver_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// branching gives a real backend a bookkeeping Brancher: these tests check what the session
// tool asks of it and what the gate records; the conformance suite checks real branching.
// plainBackend offers only what sandbox.Backend declares, and says it cannot branch.
type plainBackend struct{ sandbox.Backend }

func (p plainBackend) Capabilities() sandbox.Capabilities {
	c := p.Backend.Capabilities()
	c.Branching = false
	return c
}

type branching struct {
	sandbox.Backend
	mu    sync.Mutex
	snaps []sandbox.SnapshotRef // guarded by mu
	calls []string              // guarded by mu
}

func (f *branching) Capabilities() sandbox.Capabilities {
	c := f.Backend.Capabilities()
	c.Branching = true
	return c
}

func (f *branching) Snapshot(_ context.Context, session string) (sandbox.SnapshotRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ref := sandbox.SnapshotRef{ID: fmt.Sprintf("s%d", len(f.snaps)+1), Backend: f.Name(), Session: session}
	f.snaps = append(f.snaps, ref)
	f.calls = append(f.calls, "snapshot "+session)
	return ref, nil
}

func (f *branching) Restore(_ context.Context, id, newSession string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "restore "+id+" "+newSession)
	if !slices.ContainsFunc(f.snaps, func(r sandbox.SnapshotRef) bool { return r.ID == id }) {
		return fmt.Errorf("snapshot %s: %w", id, sandbox.ErrNotFound)
	}
	return nil
}

func (f *branching) Fork(_ context.Context, session, newSession string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "fork "+session+" "+newSession)
	return nil
}

func (f *branching) Snapshots(context.Context) ([]sandbox.SnapshotRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.snaps), nil
}

func (f *branching) RemoveSnapshot(context.Context, string) error { return sandbox.ErrNotFound }

// TestSessionTool: the session tool snapshots, lists, restores and forks the MCP session's
// sandbox session through the gate, which records each call with the client's name.
func TestSessionTool(t *testing.T) {
	var fb *branching
	e := newEnv(t, envOptions{wrap: func(b sandbox.Backend) sandbox.Backend { fb = &branching{Backend: b}; return fb }})
	cs, wait := e.connect(nil, nil)
	defer wait()
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	if !slices.Contains(info.Tools, "session") {
		t.Errorf("tools = %v; want session listed on a backend that branches", info.Tools)
	}
	var snap mcpserver.SessionResult
	ok(t, cs, "session", map[string]any{"action": "snapshot"}, &snap)
	if snap.Snapshot == nil || snap.Snapshot.ID != "s1" || snap.Session != info.Session {
		t.Fatalf("session snapshot = %+v; want s1 of %s", snap, info.Session)
	}
	var list mcpserver.SessionResult
	ok(t, cs, "session", map[string]any{"action": "snapshots"}, &list)
	if len(list.Snapshots) != 1 || list.Snapshots[0].ID != "s1" {
		t.Errorf("session snapshots = %+v; want s1", list)
	}
	var got mcpserver.SessionResult
	ok(t, cs, "session", map[string]any{"action": "fork", "name": "try-a"}, &got)
	if got.NewSession != "try-a" {
		t.Errorf("session fork = %+v; want new_session try-a", got)
	}
	ok(t, cs, "session", map[string]any{"action": "restore", "snapshot": "s1", "name": "back"}, &got)
	if msg := refused(t, cs, "session", map[string]any{"action": "restore", "snapshot": "nope", "name": "x"}); !strings.Contains(msg, "not found") {
		t.Errorf("restore of an unknown snapshot = %q; want not found", msg)
	}
	if msg := refused(t, cs, "session", map[string]any{"action": "fork"}); !strings.Contains(msg, "needs name") {
		t.Errorf("fork without a name = %q; want it to ask for name", msg)
	}
	want := []string{"snapshot " + info.Session, "fork " + info.Session + " try-a", "restore s1 back", "restore nope x"}
	if fmt.Sprint(fb.calls) != fmt.Sprint(want) {
		t.Errorf("calls reaching the backend = %q; want %q", fb.calls, want)
	}
	recs, err := audit.ReadAll(e.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	var forks int
	for _, r := range recs {
		if r.Tool == audit.ToolFork && r.Type == audit.TypeIntent {
			forks++
			if r.Client != "test-client" || r.Session != info.Session || r.NewSession != "try-a" {
				t.Errorf("fork intent = %+v; want client test-client, session %s, new_session try-a", r, info.Session)
			}
		}
	}
	if forks != 1 {
		t.Errorf("%d fork intents in the audit log; want 1", forks)
	}
}

// TestSessionToolUnsupportedAndSwitchedOff: on a backend that cannot branch the tool is not
// listed and a call says why; with tools.shell_execute off the gate refuses it.
func TestSessionToolUnsupportedAndSwitchedOff(t *testing.T) {
	// local branches; plainBackend hides that, as a backend that cannot would be.
	e := newEnv(t, envOptions{wrap: func(b sandbox.Backend) sandbox.Backend { return plainBackend{b} }})
	cs, wait := e.connect(nil, nil)
	defer wait()
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	if slices.Contains(info.Tools, "session") {
		t.Errorf("tools = %v; session listed on a backend that cannot branch", info.Tools)
	}
	if msg := refused(t, cs, "session", map[string]any{"action": "fork", "name": "x"}); !strings.Contains(msg, "cannot snapshot, restore or fork") {
		t.Errorf("session fork on a backend that cannot branch = %q; want the reason", msg)
	}

	var fb *branching
	off := newEnv(t, envOptions{configure: func(c *config.Config) { c.Tools.ShellExecute = false },
		wrap: func(b sandbox.Backend) sandbox.Backend { fb = &branching{Backend: b}; return fb }})
	cs2, wait2 := off.connect(nil, nil)
	defer wait2()
	if msg := refused(t, cs2, "session", map[string]any{"action": "fork", "name": "x"}); !strings.Contains(msg, "shell_execute") {
		t.Errorf("session fork with tools.shell_execute off = %q; want a refusal naming the switch", msg)
	}
	if len(fb.calls) != 0 {
		t.Errorf("a refused call reached the backend: %q", fb.calls)
	}
}
