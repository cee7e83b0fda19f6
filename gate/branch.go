package gate

import (
	"context"
	"fmt"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Branching calls (sandbox.Brancher) go through the same decision as a session's job calls:
// tools.shell_execute, the call cap of the session they act on, the session store, and an
// intent record written before the backend is touched, then a result. They run nothing the
// agent wrote in the sandbox, so there is nothing to classify: making a copy of a sandbox
// reaches nothing the sandbox could not already reach. Each record names the source session
// (Session), the session made (NewSession) and the snapshot (Snapshot).

// namedSession stands for a session a branching call acts on without opening it: the gate
// needs only its name (for the store, the cap and the record).
type namedSession string

func (n namedSession) Name() string { return string(n) }
func (n namedSession) Exec(context.Context, sandbox.Command) (*sandbox.Result, error) {
	return nil, sandbox.ErrUnsupported
}
func (n namedSession) Close() error { return nil }

// opSession is a gated view of the named session for one branching call, with its stored
// count and approvals, as Open would make it.
func (b *Backend) opSession(name string) *Session {
	gs := &Session{b: b, inner: namedSession(name), approved: map[string]bool{}}
	if b.opts.Store != nil {
		st, err := b.opts.Store.load(b.inner.Name(), name)
		gs.storeErr = err
		gs.absorb(st)
	}
	return gs
}

// brancher is the inner backend's Brancher, or an error wrapping sandbox.ErrUnsupported that
// says why there is none.
func (b *Backend) brancher(op string) (sandbox.Brancher, error) {
	br, ok := b.inner.(sandbox.Brancher)
	if nb, why := b.inner.(sandbox.NoBrancher); why && (!ok || !b.inner.Capabilities().Branching) {
		return nil, fmt.Errorf("%s: %w", op, nb.NoBranching())
	}
	if !ok || !b.inner.Capabilities().Branching {
		return nil, fmt.Errorf("%s: %s: %w (the %s backend cannot snapshot, restore or fork sessions)",
			b.inner.Name(), op, sandbox.ErrUnsupported, b.inner.Name())
	}
	return br, nil
}

// branchCall decides, runs and records one branching call acting on session.
func (b *Backend) branchCall(ctx context.Context, c *call, session string, fn func() error) error {
	s := b.opSession(session)
	c.classify, c.plain = ":", true
	c.switches = []toolSwitch{{b.opts.Tools.ShellExecute, "shell_execute"}}
	if err := s.admit(ctx, c); err != nil {
		return err
	}
	err := fn()
	s.record(ctx, c, nil, err)
	return err
}

// inherit gives a session made from source the state the gate keeps about source's start (its
// first PATH and directory), so that a directory the source added to PATH is still judged
// as added in the copy, not taken as where the copy started. Approvals and the call count
// are not carried: a new session starts with none, as a newly opened one does.
func (b *Backend) inherit(source, made string) {
	if b.opts.Store == nil || source == "" {
		return
	}
	st, err := b.opts.Store.load(b.inner.Name(), source)
	if err != nil || st.BasePath == "" && st.WorkDir == "" {
		return
	}
	if _, err := b.opts.Store.update(b.inner.Name(), made, func(r *storedSession) {
		r.BasePath, r.WorkDir = st.BasePath, st.WorkDir
	}); err != nil {
		b.opts.Logger.Warn("could not save the new session's starting state", "session", made, "err", err)
	}
}

// snapshotSession is the session a snapshot was taken of, "" when the inner backend does not
// list the snapshot.
func (b *Backend) snapshotSession(ctx context.Context, br sandbox.Brancher, id string) (string, error) {
	list, err := br.Snapshots(ctx)
	if err != nil {
		return "", err
	}
	for _, r := range list {
		if r.ID == id {
			return r.Session, nil
		}
	}
	return "", nil
}

// Snapshot gates and records a snapshot of the named session.
func (b *Backend) Snapshot(ctx context.Context, session string) (sandbox.SnapshotRef, error) {
	br, err := b.brancher("snapshot")
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	var ref sandbox.SnapshotRef
	c := &call{tool: audit.ToolSnapshot, label: "session snapshot", command: "session snapshot " + quote(session)}
	err = b.branchCall(ctx, c, session, func() error {
		var err error
		ref, err = br.Snapshot(ctx, session)
		c.snapshot = ref.ID
		return err
	})
	return ref, err
}

// Restore gates and records a new session made from a snapshot. The call counts against the
// new session; the record names the snapshot's session too when the backend lists it.
func (b *Backend) Restore(ctx context.Context, snapshotID, newSession string) error {
	br, err := b.brancher("restore")
	if err != nil {
		return err
	}
	source, _ := b.snapshotSession(ctx, br, snapshotID) // unknown: the record names the new session only
	c := &call{tool: audit.ToolRestore, label: "session restore",
		command:    "session restore " + quote(snapshotID) + " --as " + quote(newSession),
		newSession: newSession, snapshot: snapshotID}
	session := newSession
	if source != "" {
		session = source
	}
	err = b.branchCall(ctx, c, session, func() error { return br.Restore(ctx, snapshotID, newSession) })
	if err == nil {
		b.inherit(source, newSession)
	}
	return err
}

// Fork gates and records a fork of session into newSession.
func (b *Backend) Fork(ctx context.Context, session, newSession string) error {
	br, err := b.brancher("fork")
	if err != nil {
		return err
	}
	c := &call{tool: audit.ToolFork, label: "session fork",
		command: "session fork " + quote(session) + " " + quote(newSession), newSession: newSession}
	err = b.branchCall(ctx, c, session, func() error { return br.Fork(ctx, session, newSession) })
	if err == nil {
		b.inherit(session, newSession)
	}
	return err
}

// Snapshots passes through to the inner backend: a listing changes nothing, as Sessions.
func (b *Backend) Snapshots(ctx context.Context) ([]sandbox.SnapshotRef, error) {
	br, err := b.brancher("list snapshots")
	if err != nil {
		return nil, err
	}
	return br.Snapshots(ctx)
}

// RemoveSnapshot gates and records the removal of a snapshot, as a call on the session it was
// taken of. One the backend does not list is not found.
func (b *Backend) RemoveSnapshot(ctx context.Context, id string) error {
	br, err := b.brancher("remove snapshot")
	if err != nil {
		return err
	}
	source, err := b.snapshotSession(ctx, br, id)
	switch {
	case err != nil:
		return err
	case source == "":
		// Snapshots lists every stored snapshot (sandbox.Brancher), so this one is not stored.
		return fmt.Errorf("%s: remove snapshot %s: %w", b.inner.Name(), id, sandbox.ErrNotFound)
	}
	c := &call{tool: audit.ToolRemoveSnapshot, label: "session snapshot rm",
		command: "session snapshot rm " + quote(id), snapshot: id}
	return b.branchCall(ctx, c, source, func() error { return br.RemoveSnapshot(ctx, id) })
}

var _ sandbox.Brancher = (*Backend)(nil)
