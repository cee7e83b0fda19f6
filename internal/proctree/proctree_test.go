//go:build linux

package proctree

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tree starts sh with a child in its process group, a child that moved to a session of its
// own, and a grandchild under that one, and returns sh and the three descendants' pids.
func tree(t *testing.T) (*exec.Cmd, []int) {
	t.Helper()
	pidFile := t.TempDir() + "/pids"
	cmd := exec.Command("/bin/sh", "-c", `sleep 1000 & a=$!
setsid sh -c 'sleep 1001 & echo $$ $! > "$1"; wait' sh "$1" &
wait`, "sh", pidFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var want []int
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(pidFile)
		var inner, grand int
		if _, err := fmt.Sscan(string(b), &inner, &grand); err == nil {
			want = []int{inner, grand}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process tree did not start: %q", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The plain child: sh's child running `sleep 1000`.
	for {
		for _, p := range Descendants(cmd.Process.Pid) {
			if cmdline(p) == "sleep 1000" {
				return cmd, append(want, p)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep 1000 never appeared under %d", cmd.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && !strings.HasPrefix(string(b[i+1:]), " Z")
}

func TestDescendantsFollowsEveryBranch(t *testing.T) {
	cmd, want := tree(t)
	got := Descendants(cmd.Process.Pid)
	for _, p := range want {
		if !slices.Contains(got, p) {
			t.Errorf("Descendants(%d) = %v; want it to include %d (%s)", cmd.Process.Pid, got, p, cmdline(p))
		}
	}
	if slices.Contains(got, cmd.Process.Pid) || slices.Contains(got, os.Getpid()) {
		t.Errorf("Descendants(%d) = %v includes the root or this process", cmd.Process.Pid, got)
	}
	if d := Descendants(want[1]); len(d) != 0 {
		t.Errorf("Descendants(leaf) = %v; want none", d)
	}
}

// TestKillTakesTheWholeTree: the root, its process group, and the descendants that left the
// group all die.
func TestKillTakesTheWholeTree(t *testing.T) {
	cmd, procs := tree(t)
	Kill(cmd.Process.Pid)
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range procs {
		for alive(p) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d (%s) survived Kill", p, cmdline(p))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
