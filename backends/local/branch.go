//go:build !windows

package local

// Branching for local sessions (sandbox.Brancher).
//
// Local sessions share one working tree, the backend's directory (terminal.cwd, else where
// the tool was started), so a fork cannot simply reuse it: what the fork changes would change
// the source. A fork, and a session restored from a snapshot, therefore gets a tree of its
// own, <state dir>-branches/local/<session>, which becomes its working directory (its
// session directory names it in the file "root"). The tree lives beside the state directory,
// not in it, because commands can neither read nor write this tool's state. Removing the
// session removes its tree.
//
// What is copied is the session's tree (the backend's directory, or the fork's own) with
// copy-on-write clones (FICLONE) where the filesystem has them, and byte by byte elsewhere,
// up to local.branch_max_bytes; plus the session's saved state (working directory and
// exported environment, with paths inside the tree moved to the copy). Running processes and
// background jobs are not carried. Sockets and device files in the tree are skipped: a copy
// of either means nothing.
//
// A snapshot is the same copy into <state dir>/local-snapshots/<id>; Restore copies it out.
// Fork copies directly, without a listed snapshot.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

const (
	rootFile     = "root" // in a session directory: the session's own tree
	snapMetaFile = "snapshot.json"
	stateFile    = "state.json" // the helper's saved state (internal/agent)
)

// treesDir holds forks' and restored sessions' own trees.
func (b *Backend) treesDir() string { return filepath.Join(b.opts.StateDir+"-branches", Name) }

// snapshotsDir holds the snapshots.
func (b *Backend) snapshotsDir() string { return filepath.Join(b.opts.StateDir, "local-snapshots") }

// sessionRoot is the tree a session works in: its own (a fork's), else the backend's.
func (b *Backend) sessionRoot(dir string) string {
	if t := b.ownTree(dir); t != "" {
		return t
	}
	return b.cwd
}

// ownTree is the tree a fork or restore made for the session in dir ("" = none).
func (b *Backend) ownTree(dir string) string {
	raw, err := os.ReadFile(filepath.Join(dir, rootFile))
	if err != nil {
		return ""
	}
	t := string(raw)
	// Only a tree this backend made is trusted (and removed with the session).
	if filepath.Dir(t) != b.treesDir() {
		return ""
	}
	return t
}

// confineFor is c with, under strict, the session's own tree writable instead of the
// backend's directory.
func (b *Backend) confineFor(c *agent.Confinement, root string) *agent.Confinement {
	if c == nil || !c.Strict || root == b.cwd {
		return c
	}
	cc := *c
	cc.Writable = []string{root}
	for _, w := range c.Writable {
		if w != b.cwd {
			cc.Writable = append(cc.Writable, w)
		}
	}
	return &cc
}

type snapshotMeta struct {
	ID      string    `json:"id"`
	Session string    `json:"session"`
	Created time.Time `json:"created"`
	// Root is the source's tree when the snapshot was taken: saved paths under it are moved
	// to the restored session's tree.
	Root string `json:"root"`
	Size int64  `json:"size"`
	// Cloned says the files were cloned, so Size is mostly shared with the source.
	Cloned bool `json:"cloned"`
}

func (b *Backend) branchErr(op, id string, err error) error {
	return &sandbox.Error{Backend: Name, Op: op, ID: id, Err: err}
}

// existing checks that the named session exists and returns its directory.
func (b *Backend) existing(op, name string) (string, error) {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return "", b.branchErr(op, name, err)
	}
	dir := b.sessionDir(name)
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", b.branchErr(op, name, fmt.Errorf("no such session: %w", sandbox.ErrNotFound))
		}
		return "", b.branchErr(op, name, err)
	}
	return dir, nil
}

// claim makes the new session's directory, failing if it exists.
func (b *Backend) claim(op, name string) (string, error) {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return "", b.branchErr(op, name, err)
	}
	if err := os.MkdirAll(b.stateDir, 0o700); err != nil {
		return "", b.branchErr(op, name, err)
	}
	dir := b.sessionDir(name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", b.branchErr(op, name, fmt.Errorf("session %s exists already; remove it or pick another name: %w", name, fs.ErrExist))
		}
		return "", b.branchErr(op, name, err)
	}
	return dir, nil
}

// Snapshot copies the session's tree and saved state into the snapshot store.
func (b *Backend) Snapshot(ctx context.Context, session string) (sandbox.SnapshotRef, error) {
	dir, err := b.existing("snapshot", session)
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	id, err := newSnapshotID()
	if err != nil {
		return sandbox.SnapshotRef{}, b.branchErr("snapshot", session, err)
	}
	sdir := filepath.Join(b.snapshotsDir(), id)
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return sandbox.SnapshotRef{}, b.branchErr("snapshot", session, err)
	}
	root := b.sessionRoot(dir)
	st, err := b.copyTree(ctx, root, filepath.Join(sdir, "tree"))
	if err == nil {
		err = copyFileIfExists(filepath.Join(dir, stateFile), filepath.Join(sdir, stateFile))
	}
	if err == nil {
		err = copyFileIfExists(filepath.Join(dir, homeFile), filepath.Join(sdir, homeFile))
	}
	meta := snapshotMeta{ID: id, Session: session, Created: time.Now().UTC(), Root: root, Size: st.bytes, Cloned: st.cloned}
	if err == nil {
		err = writeJSON(filepath.Join(sdir, snapMetaFile), meta)
	}
	if err != nil {
		os.RemoveAll(sdir)
		return sandbox.SnapshotRef{}, b.branchErr("snapshot", session, err)
	}
	return meta.ref(), nil
}

func (m snapshotMeta) ref() sandbox.SnapshotRef {
	return sandbox.SnapshotRef{ID: m.ID, Backend: Name, Session: m.Session, Created: m.Created, Size: m.Size}
}

// Restore makes newSession from a snapshot, with a tree of its own.
func (b *Backend) Restore(ctx context.Context, snapshotID, newSession string) error {
	meta, sdir, err := b.readSnapshot(snapshotID)
	if err != nil {
		return b.branchErr("restore", snapshotID, err)
	}
	return b.branch(ctx, "restore", branchSource{tree: filepath.Join(sdir, "tree"), stateDir: sdir, oldRoot: meta.Root}, newSession)
}

// Fork copies the session straight into newSession; no snapshot is kept.
func (b *Backend) Fork(ctx context.Context, session, newSession string) error {
	dir, err := b.existing("fork", session)
	if err != nil {
		return err
	}
	root := b.sessionRoot(dir)
	return b.branch(ctx, "fork", branchSource{tree: root, stateDir: dir, oldRoot: root}, newSession)
}

type branchSource struct {
	tree     string // what to copy
	stateDir string // where state.json and created-in are
	oldRoot  string // the tree saved paths refer to
}

func (b *Backend) branch(ctx context.Context, op string, src branchSource, newSession string) error {
	dir, err := b.claim(op, newSession)
	if err != nil {
		return err
	}
	tree := filepath.Join(b.treesDir(), newSession)
	fail := func(err error) error {
		os.RemoveAll(dir)
		os.RemoveAll(tree)
		return b.branchErr(op, newSession, err)
	}
	if _, err := os.Lstat(tree); err == nil {
		// Left by a session removed by hand: it is ours, and stale.
		if err := os.RemoveAll(tree); err != nil {
			return fail(err)
		}
	}
	if err := os.MkdirAll(b.treesDir(), 0o700); err != nil {
		return fail(err)
	}
	if _, err := b.copyTree(ctx, src.tree, tree); err != nil {
		return fail(err)
	}
	if err := copyFileIfExists(filepath.Join(src.stateDir, homeFile), filepath.Join(dir, homeFile)); err != nil {
		return fail(err)
	}
	if err := moveState(filepath.Join(src.stateDir, stateFile), filepath.Join(dir, stateFile), src.oldRoot, tree); err != nil {
		return fail(err)
	}
	// Written last: a session directory with a root file is a finished branch.
	if err := os.WriteFile(filepath.Join(dir, rootFile), []byte(tree), 0o600); err != nil {
		return fail(err)
	}
	return nil
}

// moveState copies the saved state, moving the working directory and PWD/OLDPWD from the
// old tree to the new one when they were inside it. Other fields pass through unchanged.
func moveState(from, to, oldRoot, newRoot string) error {
	raw, err := os.ReadFile(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil // never ran a command: it starts fresh in its tree
	}
	if err != nil {
		return err
	}
	var st map[string]json.RawMessage
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("read saved state %s: %w", from, err)
	}
	move := func(p string) string {
		if p == oldRoot {
			return newRoot
		}
		if rel, ok := strings.CutPrefix(p, oldRoot+string(filepath.Separator)); ok {
			return filepath.Join(newRoot, rel)
		}
		return p
	}
	var cwd agent.Bytes
	if err := json.Unmarshal(st["cwd"], &cwd); err == nil {
		if st["cwd"], err = json.Marshal(agent.Bytes(move(string(cwd)))); err != nil {
			return err
		}
	}
	var env map[string]agent.Bytes
	if err := json.Unmarshal(st["env"], &env); err == nil && env != nil {
		for _, k := range []string{"PWD", "OLDPWD"} {
			if v, ok := env[k]; ok {
				env[k] = agent.Bytes(move(string(v)))
			}
		}
		if st["env"], err = json.Marshal(env); err != nil {
			return err
		}
	}
	out, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return os.WriteFile(to, out, 0o600)
}

// Snapshots lists the stored snapshots, oldest first.
func (b *Backend) Snapshots(ctx context.Context) ([]sandbox.SnapshotRef, error) {
	entries, err := os.ReadDir(b.snapshotsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, b.branchErr("snapshots", "", err)
	}
	var out []sandbox.SnapshotRef
	for _, e := range entries {
		meta, _, err := b.readSnapshot(e.Name())
		if err != nil {
			continue // half-made (its snapshot.json is written last) or not ours
		}
		out = append(out, meta.ref())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// RemoveSnapshot deletes a snapshot; sessions restored from it have their own copies.
func (b *Backend) RemoveSnapshot(ctx context.Context, id string) error {
	_, sdir, err := b.readSnapshot(id)
	if err != nil {
		return b.branchErr("snapshot rm", id, err)
	}
	if err := os.RemoveAll(sdir); err != nil {
		return b.branchErr("snapshot rm", id, err)
	}
	return nil
}

func (b *Backend) readSnapshot(id string) (snapshotMeta, string, error) {
	if !validSnapshotID(id) {
		return snapshotMeta{}, "", fmt.Errorf("no snapshot %q (local snapshot ids look like snap-1a2b3c4d5e6f): %w", id, sandbox.ErrNotFound)
	}
	sdir := filepath.Join(b.snapshotsDir(), id)
	raw, err := os.ReadFile(filepath.Join(sdir, snapMetaFile))
	if errors.Is(err, os.ErrNotExist) {
		return snapshotMeta{}, "", fmt.Errorf("no snapshot %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return snapshotMeta{}, "", err
	}
	var m snapshotMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return snapshotMeta{}, "", fmt.Errorf("snapshot %s: %w", id, err)
	}
	return m, sdir, nil
}

func newSnapshotID() (string, error) {
	var buf [6]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return "", err
	}
	return "snap-" + hex.EncodeToString(buf[:]), nil
}

func validSnapshotID(id string) bool {
	h, ok := strings.CutPrefix(id, "snap-")
	if !ok || len(h) != 12 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

func writeJSON(path string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}

func copyFileIfExists(from, to string) error {
	raw, err := os.ReadFile(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.WriteFile(to, raw, 0o600)
}
