//go:build !windows

package local_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

const guardChildEnv = "HERMES_LOCAL_GUARD_CHILD"

// TestCallerKilledChild is the caller of TestCallerKilled: it runs the script in
// $HERMES_LOCAL_GUARD_CHILD in a local session rooted in the directory of its first
// argument, says so, and waits to be killed. It does nothing in an ordinary run.
func TestCallerKilledChild(t *testing.T) {
	spec := os.Getenv(guardChildEnv)
	if spec == "" {
		return
	}
	root, script, _ := strings.Cut(spec, "\n")
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = root
	b, err := local.New(cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(root, "state"),
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root}}))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := b.Open(context.Background(), "caller")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("STARTING")
	res, err := sess.Exec(context.Background(), sandbox.Command{Script: script})
	t.Fatalf("the command ended before its caller was killed: %+v, %v", res, err)
}

// TestCallerKilled: when the process that runs a local session's command is killed with
// SIGKILL, the command's whole tree dies with it, not reparented to init.
func TestCallerKilled(t *testing.T) {
	root := t.TempDir()
	marker := fmt.Sprintf("%d.%06d", 3600+rand.IntN(100), rand.IntN(1000000))
	cmd := exec.Command(os.Args[0], "-test.run=^TestCallerKilledChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), guardChildEnv+"="+root+"\n"+fmt.Sprintf("sleep %s & (sleep %s; true); wait", marker, marker))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); killMarked(marker) })
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "STARTING" {
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(marked(marker)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the command's two sleeps never started (found %v)", marked(marker))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline = time.Now().Add(20 * time.Second)
	for left := marked(marker); len(left) > 0; left = marked(marker) {
		if time.Now().After(deadline) {
			t.Fatalf("20 s after its caller was killed, the command's processes %v still run", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// marked returns the live processes whose command line contains marker.
func marked(marker string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cl), marker) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := strings.LastIndexByte(string(stat), ')'); err == nil && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue // a zombie has ended
		}
		out = append(out, pid)
	}
	return out
}

func killMarked(marker string) {
	for _, pid := range marked(marker) {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
}
