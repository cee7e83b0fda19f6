package shellwrap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run runs the wrapper with /bin/sh on this machine.
func run(t *testing.T, st string, env []string, mode string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", Wrapper, "sh", st, st + ".pid", mode}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}, env...)
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func TestWrapperState(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "s", "state.env")
	if _, code := run(t, st, nil, "eval", "cd "+dir+" && export A='x y' K=session; L=1; exit 3"); code != 3 {
		t.Fatalf("exit = %d; want 3", code)
	}
	out, _ := run(t, st, nil, "eval", `pwd; echo "$A|${L-unset}|$K"`)
	if want := dir + "\nx y|unset|session\n"; out != want {
		t.Errorf("state = %q; want %q", out, want)
	}
	// A per-command variable wins over the session's and is not saved.
	out, _ = run(t, st, []string{"HERMES_FB_CMDENV=K N", "K=cmd", "N=new"}, "eval", `echo "$K|$N"`)
	if out != "cmd|new\n" {
		t.Errorf("per-command env = %q; want cmd|new", out)
	}
	out, _ = run(t, st, nil, "eval", `echo "${K-unset}|${N-unset}"`)
	if out != "unset|unset\n" {
		t.Errorf("after a per-command env = %q; want both unset (not saved)", out)
	}
	// A missing directory: the marker file, exit 1, nothing run, state kept.
	nd := filepath.Join(dir, "nodir")
	out, code := run(t, st, []string{"HERMES_FB_DIR=/no/such/dir", "HERMES_FB_NODIR=" + nd}, "eval", "echo ran; cd /")
	if _, err := os.Stat(nd); err != nil || code != 1 || strings.Contains(out, "ran") {
		t.Errorf("missing dir = %q exit %d marker %v; want exit 1, marker, nothing run", out, code, err)
	}
	if out, _ = run(t, st, nil, "argv", "", "pwd"); out != dir+"\n" {
		t.Errorf("argv pwd = %q; want %q", out, dir)
	}
	env, err := ParseExports(mustRead(t, st))
	if err != nil || env["HERMES_FB_PWD"] != dir || env["A"] != "x y" {
		t.Errorf("ParseExports(state) = %v, %v", env, err)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestKillTree(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "state.env")
	m := fmt.Sprintf("61%d", time.Now().UnixNano()%1_000_000) // unique: not another run's sleeps
	cmd := exec.Command("/bin/sh", "-c", Wrapper, "sh", st, st+".pid", "eval", "setsid sleep 1"+m+" & sleep 2"+m+" & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The sleeps themselves, not the shells whose scripts name them.
	count := func() int {
		n := 0
		files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if strings.HasPrefix(string(b), "sleep\x00") && strings.HasSuffix(string(b), m+"\x00") {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the tree did not start: %d processes", count())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := exec.Command("/bin/sh", "-c", KillTree, "sh", st+".pid").CombinedOutput(); err != nil {
		t.Fatalf("KillTree: %v %s", err, out)
	}
	cmd.Wait()
	for count() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes left after KillTree", count())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWrapperStateSaved: the state is saved even when the script sets its own EXIT trap, and
// the pid file is left behind exactly when the state could not be saved.
func TestWrapperStateSaved(t *testing.T) {
	dir := t.TempDir()
	sd := filepath.Join(dir, "s")
	st := filepath.Join(sd, "state.env")
	pf := filepath.Join(dir, "run.pid")
	wrap := func(script string) (string, int, bool) {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", Wrapper, "sh", st, pf, "eval", script)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		_, err = os.Stat(pf)
		os.Remove(pf)
		return string(out), code, err == nil
	}
	out, code, left := wrap("trap 'echo bye' EXIT; cd " + dir + " && export T=trapped")
	if out != "bye\n" || code != 0 || left {
		t.Errorf("script with its own EXIT trap = %q exit %d, pid file left %v; want bye, 0, removed", out, code, left)
	}
	if out, _, _ = wrap(`pwd; echo "${T-lost}"`); out != dir+"\ntrapped\n" {
		t.Errorf("state after a script with its own EXIT trap = %q; want %q", out, dir+"\ntrapped\n")
	}
	// An unwritable state directory, as a full disk refuses the save.
	if os.Geteuid() == 0 {
		t.Log("running as root: a read-only directory does not refuse writes; the state path is pointed at a missing directory instead")
		out, code, left = wrap("cd / && export T=unsaved; __hermes_st=/nonexistent-hermes-dir/state")
	} else {
		if err := os.Chmod(sd, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(sd, 0o700) })
		out, code, left = wrap("cd / && export T=unsaved")
		os.Chmod(sd, 0o700)
	}
	if code != 0 || !left {
		t.Errorf("unwritable state = %q exit %d, pid file left %v; want exit 0 and the pid file left", out, code, left)
	}
	if out, _, _ = wrap(`pwd; echo "${T-lost}"`); out != dir+"\ntrapped\n" {
		t.Errorf("state after a failed save = %q; want the state from before it", out)
	}
}

func TestAwait(t *testing.T) {
	done := make(chan int, 1)
	done <- 7
	if v, to, in := Await(context.Background(), time.Hour, done); v != 7 || to || in {
		t.Errorf("Await(done) = %d %v %v; want 7 false false", v, to, in)
	}
	if v, to, in := Await(context.Background(), time.Millisecond, make(chan int)); v != 0 || !to || in {
		t.Errorf("Await(timeout) = %d %v %v; want 0 true false", v, to, in)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, to, in := Await(ctx, 0, make(chan int)); to || !in {
		t.Errorf("Await(cancelled, no timeout) = %v %v; want false true", to, in)
	}
}
