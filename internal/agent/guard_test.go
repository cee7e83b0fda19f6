//go:build unix

package agent

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestGuardKillsTheGroupsStillListed: when its pipe ends, the guard kills the process groups
// it was told of and not told were over, and no other.
func TestGuardKillsTheGroupsStillListed(t *testing.T) {
	start := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	a, b, c := start(), start(), start()
	var g guard
	g.add(a.Process.Pid)
	g.add(b.Process.Pid)
	g.add(c.Process.Pid)
	g.remove(b.Process.Pid)
	g.close()
	ended := func(cmd *exec.Cmd) bool {
		done := make(chan struct{})
		go func() { cmd.Process.Wait(); close(done) }()
		select {
		case <-done:
			return true
		case <-time.After(10 * time.Second):
			return false
		}
	}
	if !ended(a) || !ended(c) {
		t.Error("a listed group outlived the guard's pipe")
	}
	// (a killed b would be a zombie until reaped: look at its state, not only that it exists)
	if st, err := os.ReadFile("/proc/" + strconv.Itoa(b.Process.Pid) + "/stat"); err != nil || zombie(string(st)) {
		t.Errorf("group %d, taken off the list, was killed", b.Process.Pid)
	}
}
