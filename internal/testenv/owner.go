package testenv

import (
	"os/exec"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// GoneOwner is a sandbox.ProcessOwner string for a process that has exited: its pid and
// start time no longer name a live process, as after a killed MCP server.
func GoneOwner(t testing.TB) string {
	t.Helper()
	gone := exec.Command("sleep", "30")
	if err := gone.Start(); err != nil {
		t.Fatal(err)
	}
	owner := sandbox.OwnerOf(gone.Process.Pid)
	gone.Process.Kill()
	gone.Wait()
	if alive, known := sandbox.OwnerAlive(owner); alive || !known {
		t.Fatalf("OwnerAlive(%q) = %v, %v after the process ended; want false, true", owner, alive, known)
	}
	return owner
}
