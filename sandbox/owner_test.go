package sandbox

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOwnerAlive: this process is alive; one that ended is known to be gone; an owner that
// cannot be judged here (another host or boot, no start time, an old format) is unknown.
func TestOwnerAlive(t *testing.T) {
	if alive, known := OwnerAlive(ProcessOwner()); !alive || !known {
		t.Errorf("OwnerAlive(this process) = %v, %v; want true, true", alive, known)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	owner := OwnerOf(cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	if alive, known := OwnerAlive(owner); alive || !known {
		t.Errorf("OwnerAlive(an ended process) = %v, %v; want false, true", alive, known)
	}
	host, _ := os.Hostname()
	parts := strings.Split(ProcessOwner(), "/")
	for _, o := range []string{
		"another-host/" + strings.Join(parts[1:], "/"),
		host + "/000000000000/" + strings.Join(parts[2:], "/"),
		strings.Join(parts[:3], "/") + "/0",
		host + "/" + strings.Join(parts[2:], "/"), // HOST/PID/START, the older form
		"",
	} {
		if alive, known := OwnerAlive(o); known {
			t.Errorf("OwnerAlive(%q) = %v, known; want unknown", o, alive)
		}
	}
}
