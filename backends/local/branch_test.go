//go:build !windows

package local_test

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// branchBackend is a local backend over a fresh working tree, with local.branch_max_bytes
// max (0 = default). It returns the backend and the working tree.
func branchBackend(t *testing.T, mode config.Confine, max int64) (*local.Backend, string) {
	t.Helper()
	return branchBackendIn(t, "/var/tmp", mode, max)
}

// reflinkEnv names a directory on a filesystem that clones files (btrfs, XFS with reflink),
// for the copy-on-write tests; /var/tmp is used without it.
const reflinkEnv = "HERMES_SANDBOX_TEST_REFLINK_DIR"

func branchBackendIn(t *testing.T, parent string, mode config.Confine, max int64) (*local.Backend, string) {
	t.Helper()
	root, err := os.MkdirTemp(parent, "hermes-local-branch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	state, work := filepath.Join(root, "state"), filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = work
	cfg.Local.Confine = mode
	sec := local.SectionOf(cfg)
	if max > 0 {
		sec.BranchMaxBytes = max
	}
	b, err := local.NewWith(sec, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state,
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.(*local.Backend), work
}

// run runs script in the named session and returns its stdout, failing on a non-zero exit.
func run(t *testing.T, b sandbox.Backend, session, script string) string {
	t.Helper()
	s, err := b.Open(t.Context(), session)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Exec(t.Context(), sandbox.Command{Script: script})
	if err != nil {
		t.Fatalf("%s: Exec(%q): %v", session, script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s: Exec(%q) = exit %d, stderr %q", session, script, res.ExitCode, res.Stderr)
	}
	return strings.TrimSpace(res.Stdout)
}

func TestForkCarriesTreeAndState(t *testing.T) {
	for _, mode := range []config.Confine{config.ConfineOff, config.ConfineStrict} {
		t.Run(string(mode), func(t *testing.T) {
			b, work := branchBackend(t, mode, 0)
			run(t, b, "src", "mkdir -p sub && echo one > sub/f && cd sub && export BRANCH_VAR=kept")
			if err := b.Fork(t.Context(), "src", "fork"); err != nil {
				t.Fatalf("Fork: %v", err)
			}
			// The fork works in its own copy, in the same place relative to it, with the export.
			got := run(t, b, "fork", `printf '%s|%s|%s' "$PWD" "$BRANCH_VAR" "$(cat f)"`)
			parts := strings.Split(got, "|")
			if len(parts) != 3 || !strings.HasSuffix(parts[0], "/fork/sub") || strings.HasPrefix(parts[0], work) ||
				parts[1] != "kept" || parts[2] != "one" {
				t.Fatalf("fork sees %q; want its own tree's sub, kept, one", got)
			}
			// Changes go one way only. Under strict, the fork's own tree must be writable.
			run(t, b, "fork", "echo fork > f && echo new > only-fork")
			run(t, b, "src", "echo src > f && echo new > only-src")
			if got := run(t, b, "src", "cat f; ls"); got != "src\nf\nonly-src" {
				t.Errorf("source sees %q after the fork wrote; want its own f and only-src", got)
			}
			if got := run(t, b, "fork", "cat f; ls"); got != "fork\nf\nonly-fork" {
				t.Errorf("fork sees %q after the source wrote; want its own f and only-fork", got)
			}
			// Removing the source leaves the fork whole; removing the fork removes its tree.
			if err := b.Remove(t.Context(), "src"); err != nil {
				t.Fatal(err)
			}
			if got := run(t, b, "fork", "cat f"); got != "fork" {
				t.Errorf("fork after the source's removal reads %q; want fork", got)
			}
			tree := parts[0][:len(parts[0])-len("/sub")]
			if err := b.Remove(t.Context(), "fork"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(tree); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the fork's tree %s after Remove: %v; want it gone", tree, err)
			}
		})
	}
}

func TestForkErrors(t *testing.T) {
	b, _ := branchBackend(t, config.ConfineOff, 0)
	if err := b.Fork(t.Context(), "absent", "x"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Fork(absent) = %v; want ErrNotFound", err)
	}
	run(t, b, "a", "true")
	run(t, b, "b", "true")
	if err := b.Fork(t.Context(), "a", "b"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Fork(a, existing b) = %v; want fs.ErrExist", err)
	}
	if err := b.Fork(t.Context(), "a", "../x"); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("Fork(a, ../x) = %v; want ErrInvalidConfig", err)
	}
}

func TestSnapshotRestore(t *testing.T) {
	b, _ := branchBackend(t, config.ConfineOff, 0)
	run(t, b, "src", "echo v1 > f && export V=1")
	ref, err := b.Snapshot(t.Context(), "src")
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if ref.ID == "" || ref.Session != "src" || ref.Backend != local.Name || ref.Size != 3 {
		t.Errorf("Snapshot = %+v; want an id, session src, backend local, size 3", ref)
	}
	run(t, b, "src", "echo v2 > f && echo later > g && export V=2")
	if err := b.Restore(t.Context(), ref.ID, "old"); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got := run(t, b, "old", `cat f; echo "$V"; ls`); got != "v1\n1\nf" {
		t.Errorf("restored session sees %q; want v1, V=1 and no later file", got)
	}
	if err := b.Restore(t.Context(), ref.ID, "old"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Restore into an existing session = %v; want fs.ErrExist", err)
	}
	list, err := b.Snapshots(t.Context())
	if err != nil || len(list) != 1 || list[0].ID != ref.ID {
		t.Fatalf("Snapshots = %+v, %v; want just %s", list, err, ref.ID)
	}
	if err := b.RemoveSnapshot(t.Context(), ref.ID); err != nil {
		t.Fatal(err)
	}
	if got := run(t, b, "old", "cat f"); got != "v1" {
		t.Errorf("restored session after RemoveSnapshot reads %q; want v1", got)
	}
	if list, _ := b.Snapshots(t.Context()); len(list) != 0 {
		t.Errorf("Snapshots after RemoveSnapshot = %+v; want none", list)
	}
	for _, id := range []string{ref.ID, "snap-000000000000", "../../etc", ""} {
		if err := b.RemoveSnapshot(t.Context(), id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("RemoveSnapshot(%q) = %v; want ErrNotFound", id, err)
		}
		if err := b.Restore(t.Context(), id, "x"+strings.Repeat("y", len(id)%3)); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Restore(%q) = %v; want ErrNotFound", id, err)
		}
	}
}

// TestBranchLimit: where files cannot be cloned, a copy beyond local.branch_max_bytes fails
// with a clear error and leaves no half-made session.
func TestBranchLimit(t *testing.T) {
	b, work := branchBackend(t, config.ConfineOff, 4096)
	if local.CanClone(t, work) {
		t.Skip("the test tree's filesystem clones files (FICLONE), so nothing counts against the limit")
	}
	if err := os.WriteFile(filepath.Join(work, "small"), make([]byte, 4000), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, b, "src", "true")
	if err := b.Fork(t.Context(), "src", "ok"); err != nil {
		t.Fatalf("Fork of 4000 bytes under a 4096 limit: %v", err)
	}
	if err := os.WriteFile(filepath.Join(work, "big"), make([]byte, 200), 0o644); err != nil {
		t.Fatal(err)
	}
	err := b.Fork(t.Context(), "src", "toobig")
	if !errors.Is(err, sandbox.ErrLimit) || !strings.Contains(err.Error(), "local.branch_max_bytes") {
		t.Fatalf("Fork of 4200 bytes under a 4096 limit = %v; want ErrLimit naming local.branch_max_bytes", err)
	}
	if _, err := b.Snapshot(t.Context(), "src"); !errors.Is(err, sandbox.ErrLimit) {
		t.Errorf("Snapshot of 4200 bytes under a 4096 limit = %v; want ErrLimit", err)
	}
	infos, _ := b.Sessions(t.Context())
	for _, in := range infos {
		if in.Name == "toobig" {
			t.Errorf("the failed fork left session %q", in.Name)
		}
	}
	if list, _ := b.Snapshots(t.Context()); len(list) != 0 {
		t.Errorf("the failed snapshot left %+v", list)
	}
}

// TestForkClones checks the copy-on-write path where the test tree's filesystem has it
// (btrfs, XFS with reflink): a file far over the byte-copy limit forks, because clones do
// not count.
func TestForkClones(t *testing.T) {
	parent := cmp.Or(os.Getenv(reflinkEnv), "/var/tmp")
	b, work := branchBackendIn(t, parent, config.ConfineOff, 4096)
	if !local.CanClone(t, work) {
		t.Skipf("the test tree's filesystem (under %s) cannot clone files (FICLONE); set %s to a directory on btrfs or XFS to test the clone path",
			parent, reflinkEnv)
	}
	if err := os.WriteFile(filepath.Join(work, "big"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, b, "src", "true")
	if err := b.Fork(t.Context(), "src", "fork"); err != nil {
		t.Fatalf("Fork of a cloneable 1 MiB file under a 4096-byte copy limit: %v", err)
	}
	if got := run(t, b, "fork", "wc -c < big"); got != "1048576" {
		t.Errorf("fork's big file has %s bytes; want 1048576", got)
	}
	// A clone is a copy: writing the fork's file leaves the source's alone.
	run(t, b, "fork", "printf x | dd of=big bs=1 seek=10 conv=notrunc 2>/dev/null")
	if got := run(t, b, "src", "od -An -c -j10 -N1 big | tr -d ' '"); got != `\0` {
		t.Errorf("source's big file at byte 10 after the fork wrote its own = %q; want \\0", got)
	}
	ref, err := b.Snapshot(t.Context(), "src")
	if err != nil || ref.Size != 1<<20 {
		t.Errorf("Snapshot of a cloneable 1 MiB tree under a 4096-byte copy limit = %+v, %v", ref, err)
	}
}
