//go:build unix

package channel

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestResolvePathFollowsTheSession: the session resolves paths in its current state, which
// commands change, and links on the helper's side.
func TestResolvePathFollowsTheSession(t *testing.T) {
	s, _ := newSession(t)
	var _ sandbox.PathResolver = s
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, work := filepath.Join(d, "home"), filepath.Join(d, "work")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(work, "innocent")); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if res, err := s.Exec(ctx, sandbox.Command{Script: "cd " + sandbox.ShellQuote(work) + " && export HOME=" + sandbox.ShellQuote(home)}); err != nil || res.ExitCode != 0 {
		t.Fatalf("setup: %v, %v", res, err)
	}
	for in, want := range map[string]string{
		"~/.bashrc":  filepath.Join(home, ".bashrc"),
		"innocent":   filepath.Join(home, ".ssh", "id_ed25519"),
		"a/new.txt":  filepath.Join(work, "a", "new.txt"),
		work + "/..": d,
	} {
		if got, err := s.ResolvePath(ctx, in); err != nil || got != want {
			t.Errorf("ResolvePath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
