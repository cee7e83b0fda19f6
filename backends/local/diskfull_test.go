//go:build !windows

package local_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestStateDirFullReported fills the disk that holds the session's state, as in the issue
// (/tmp full): a command's cd and export cannot be saved, the result says so, and the session
// keeps the state it had.
func TestStateDirFullReported(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	root := t.TempDir()
	state, work := filepath.Join(root, "state"), filepath.Join(root, "work")
	for _, d := range []string{state, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", state).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", state).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", state, err, out)
		}
	})
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = work
	b, err := local.New(cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state,
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	sess, err := b.Open(t.Context(), "full")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	exec1 := func(script string) *sandbox.Result {
		t.Helper()
		res, err := sess.Exec(t.Context(), sandbox.Command{Script: script})
		if err != nil {
			t.Fatalf("Exec(%q) error = %v", script, err)
		}
		return res
	}
	if res := exec1("export HERMES_FULL=before"); res.StateNotSaved {
		t.Fatalf("Exec(export) with room on the disk: state not saved (%s)", res.StateError)
	}
	// Fill the disk from outside the sandbox.
	filler := filepath.Join(state, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	res := exec1("cd / && export HERMES_FULL=after")
	if !res.StateNotSaved || res.StateError == "" || res.ExitCode != 0 {
		t.Errorf("Exec(export) on a full disk = exit %d, state not saved %v (%q); want 0, true and a reason", res.ExitCode, res.StateNotSaved, res.StateError)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	res = exec1(`pwd; echo "$HERMES_FULL"`)
	if want := work + "\nbefore\n"; res.Stdout != want || res.StateNotSaved {
		t.Errorf("after a failed save: %q (state not saved %v); want the state from before it, %q", res.Stdout, res.StateNotSaved, want)
	}
}
