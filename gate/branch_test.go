package gate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// fakeBrancher adds a bookkeeping-only Brancher to a real backend: it checks what reaches it,
// nothing more (the conformance suite checks real branching).
type fakeBrancher struct {
	sandbox.Backend
	mu    sync.Mutex
	snaps map[string]string // guarded by mu; id → session
	calls []string          // guarded by mu
	n     int               // guarded by mu
}

func (f *fakeBrancher) Capabilities() sandbox.Capabilities {
	c := f.Backend.Capabilities()
	c.Branching = true
	return c
}

func (f *fakeBrancher) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeBrancher) Snapshot(ctx context.Context, session string) (sandbox.SnapshotRef, error) {
	f.note("snapshot " + session)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := fmt.Sprintf("snap-%d", f.n)
	f.snaps[id] = session
	return sandbox.SnapshotRef{ID: id, Backend: f.Name(), Session: session}, nil
}

func (f *fakeBrancher) Restore(ctx context.Context, id, newSession string) error {
	f.note("restore " + id + " " + newSession)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.snaps[id]; !ok {
		return sandbox.ErrNotFound
	}
	return nil
}

func (f *fakeBrancher) Fork(ctx context.Context, session, newSession string) error {
	f.note("fork " + session + " " + newSession)
	return nil
}

func (f *fakeBrancher) Snapshots(ctx context.Context) ([]sandbox.SnapshotRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sandbox.SnapshotRef
	for id, s := range f.snaps {
		out = append(out, sandbox.SnapshotRef{ID: id, Backend: f.Name(), Session: s})
	}
	return out, nil
}

func (f *fakeBrancher) RemoveSnapshot(ctx context.Context, id string) error {
	f.note("rm " + id)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.snaps[id]; !ok {
		return sandbox.ErrNotFound
	}
	delete(f.snaps, id)
	return nil
}

// branchEnv is newEnv with the fake Brancher behind the gate.
func branchEnv(t *testing.T, mutate func(*gate.Options)) (*env, *fakeBrancher, sandbox.Brancher) {
	t.Helper()
	var fb *fakeBrancher
	e := newEnv(t, mutate)
	fb = &fakeBrancher{Backend: e.inner, snaps: map[string]string{}}
	e.b = gate.Wrap(fb, e.opts)
	return e, fb, e.b.(sandbox.Brancher)
}

// plainBackend hides every ability of the backend it holds but the Backend interface.
type plainBackend struct{ sandbox.Backend }

// whyNotBackend is a backend that does not branch and says why (sandbox.NoBrancher).
type whyNotBackend struct{ sandbox.Backend }

func (whyNotBackend) NoBranching() error {
	return fmt.Errorf("the vendor's contract leaves forks open: %w", sandbox.ErrUnsupported)
}

func TestBranchingUnsupportedSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(sandbox.Backend) sandbox.Backend
		want string
	}{
		{"plain", func(b sandbox.Backend) sandbox.Backend { return plainBackend{b} }, "cannot snapshot, restore or fork"},
		{"NoBrancher", func(b sandbox.Backend) sandbox.Backend { return whyNotBackend{b} }, "the vendor's contract leaves forks open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			g := gate.Wrap(tc.wrap(e.inner), e.opts)
			br, ok := g.(sandbox.Brancher)
			if !ok {
				t.Fatal("a gated backend does not implement sandbox.Brancher")
			}
			ctx := context.Background()
			_, serr := br.Snapshot(ctx, "s1")
			for name, err := range map[string]error{"Snapshot": serr, "Fork": br.Fork(ctx, "s1", "s2"),
				"Restore": br.Restore(ctx, "x", "s2"), "RemoveSnapshot": br.RemoveSnapshot(ctx, "x")} {
				if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s = %v; want ErrUnsupported saying %q", name, err, tc.want)
				}
			}
			if rs := e.records(t); len(rs) != 0 {
				t.Errorf("unsupported calls left %d audit records; want none (nothing was attempted)", len(rs))
			}
		})
	}
}

func TestBranchingAudited(t *testing.T) {
	e, fb, br := branchEnv(t, nil)
	ctx := gate.WithCaller(context.Background(), gate.Caller{Client: "agent-x", Transport: "stdio"})
	ref, err := br.Snapshot(ctx, "src")
	if err != nil || ref.ID == "" {
		t.Fatalf("Snapshot = %+v, %v", ref, err)
	}
	if err := br.Fork(ctx, "src", "copy"); err != nil {
		t.Fatal(err)
	}
	if err := br.Restore(ctx, ref.ID, "again"); err != nil {
		t.Fatal(err)
	}
	if err := br.RemoveSnapshot(ctx, ref.ID); err != nil {
		t.Fatal(err)
	}
	if err := br.RemoveSnapshot(ctx, ref.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("RemoveSnapshot(removed) = %v; want ErrNotFound", err)
	}
	want := []string{"snapshot src", "fork src copy", "restore " + ref.ID + " again", "rm " + ref.ID}
	if fmt.Sprint(fb.calls) != fmt.Sprint(want) {
		t.Errorf("calls reaching the backend = %q; want %q", fb.calls, want)
	}
	type row struct{ typ, tool, session, newSession, snapshot string }
	var got []row
	for _, r := range e.records(t) {
		got = append(got, row{r.Type, r.Tool, r.Session, r.NewSession, r.Snapshot})
		if r.Type == audit.TypeIntent && (r.Client != "agent-x" || r.Transport != "stdio" || r.Decision != audit.DecisionAllowed) {
			t.Errorf("intent %+v; want client agent-x over stdio, allowed", r)
		}
	}
	wantRows := []row{
		{audit.TypeIntent, audit.ToolSnapshot, "src", "", ""},
		{audit.TypeResult, audit.ToolSnapshot, "src", "", ref.ID},
		{audit.TypeIntent, audit.ToolFork, "src", "copy", ""},
		{audit.TypeResult, audit.ToolFork, "src", "copy", ""},
		{audit.TypeIntent, audit.ToolRestore, "src", "again", ref.ID},
		{audit.TypeResult, audit.ToolRestore, "src", "again", ref.ID},
		{audit.TypeIntent, audit.ToolRemoveSnapshot, "src", "", ref.ID},
		{audit.TypeResult, audit.ToolRemoveSnapshot, "src", "", ref.ID},
	}
	if fmt.Sprint(got) != fmt.Sprint(wantRows) {
		t.Errorf("audit records =\n%v\nwant\n%v", got, wantRows)
	}
	if rs := e.records(t); len(rs) > 2 && !strings.Contains(audit.Format(rs[2]), "new_session=copy") {
		t.Errorf("Format(fork intent) = %q; want it to name the new session", audit.Format(rs[2]))
	}
}

func TestBranchingRefusedLikeCommands(t *testing.T) {
	t.Run("shell_execute off", func(t *testing.T) {
		e, fb, br := branchEnv(t, func(o *gate.Options) { o.Tools.ShellExecute = false })
		err := br.Fork(context.Background(), "src", "copy")
		refusal(t, err, "tool-disabled")
		if len(fb.calls) != 0 {
			t.Errorf("a refused fork reached the backend: %q", fb.calls)
		}
		rs := e.records(t)
		if len(rs) != 1 || rs[0].Decision != audit.DecisionRefused || rs[0].Tool != audit.ToolFork || rs[0].NewSession != "copy" {
			t.Errorf("records = %+v; want one refused fork naming the new session", rs)
		}
	})
	t.Run("call cap", func(t *testing.T) {
		_, fb, br := branchEnv(t, func(o *gate.Options) { o.MaxToolCalls = 2; o.Store = gate.NewStore(t.TempDir()) })
		ctx := context.Background()
		if _, err := br.Snapshot(ctx, "src"); err != nil {
			t.Fatal(err)
		}
		if err := br.Fork(ctx, "src", "a"); err != nil {
			t.Fatal(err)
		}
		refusal(t, br.Fork(ctx, "src", "b"), "call-limit")
		if len(fb.calls) != 2 {
			t.Errorf("calls past the cap reached the backend: %q", fb.calls)
		}
	})
}
