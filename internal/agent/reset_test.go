//go:build unix

package agent

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestResetRefusedOutsidePoolContainer: a reset ends every other process of its user and
// empties directories; anywhere but a pool container (here: a test process on the host) it
// must refuse and touch nothing. The process and the file it would remove are checked alive
// and present before and after.
func TestResetRefusedOutsidePoolContainer(t *testing.T) {
	dir := t.TempDir()
	srv, err := NewServer(Options{StateDir: filepath.Join(dir, "state"), Cwd: dir, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + dir}})
	if err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(dir, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	for _, probe := range []bool{true, false} {
		_, err := srv.reset(ResetRequest{Probe: probe, Wipe: []string{dir}})
		if !errors.Is(err, errInvalid) {
			t.Errorf("reset(probe %v) outside a pool container: error = %v; want a refusal", probe, err)
		}
	}
	if err := sleeper.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the refused reset ended a process: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the refused reset removed a file: %v", err)
	}
}
