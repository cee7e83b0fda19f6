//go:build unix

package cli_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// TestMain removes the binaries the end-to-end tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveBuilt()
	os.Exit(code)
}

// binary builds the real static hermes-sandbox once per test process (removed by TestMain).
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	return testenv.BuildBinary(t, "./cmd/hermes-sandbox")
}

func (e *env) command(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(binary(t), args...)
	cmd.Env = e.environ
	e.stopOwnersOnCleanup(t)
	return cmd
}

// stopOwnersOnCleanup makes the test end by stopping the session owners its runs of the
// binary started (terminal.keep_alive), before its directory is removed under them.
func (e *env) stopOwnersOnCleanup(t *testing.T) {
	e.ownersOnce.Do(func() {
		t.Cleanup(func() {
			pattern := "owner-serve --socket " + e.dir + "/"
			out, _ := exec.Command("pgrep", "-f", pattern).Output()
			pids := strings.Fields(string(out))
			for _, p := range pids {
				if pid, err := strconv.Atoi(p); err == nil {
					_ = syscall.Kill(pid, syscall.SIGTERM)
				}
			}
			deadline := time.Now().Add(15 * time.Second)
			for _, p := range pids {
				for processRuns(p) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if processRuns(p) {
					t.Errorf("session owner %s still runs 15 s after SIGTERM", p)
				}
			}
		})
	})
}

// processRuns reports whether process pid exists and is not a zombie (a detached owner's
// parent may be a PID 1 that does not reap).
func processRuns(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestGigabyteOfOutputStaysSmall: 1 GiB of output must not grow the CLI's memory, and the
// spill file must hold its first and last 32 MiB (terminal.spill_limit, 64 MiB by default)
// with a note of the gap.
func TestGigabyteOfOutputStaysSmall(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	cmd := e.command(t, "exec", "--json", "-c", "head -c 1073741824 /dev/zero")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := watchPeakRSS(cmd.Process.Pid)
	err := cmd.Wait()
	rssKiB := peak()
	if err != nil {
		t.Fatalf("exec 1 GiB: %v", err)
	}
	if rssKiB == 0 {
		t.Fatal("could not read the CLI's VmHWM from /proc")
	}
	rssMiB := rssKiB / 1024
	t.Logf("peak RSS of the CLI for 1 GiB of output: %d MiB", rssMiB)
	out := []byte(stdout.String())
	if rssMiB > 64 {
		t.Errorf("peak RSS %d MiB; want ≤ 64 MiB", rssMiB)
	}
	s := string(out)
	i := strings.Index(s, `"output_file":"`)
	if i < 0 || !strings.Contains(s, `"truncated":true`) {
		t.Fatalf("result lacks a spill file: %.300s", s)
	}
	p := s[i+len(`"output_file":"`):]
	p = p[:strings.IndexByte(p, '"')]
	fi, err := os.Stat(p)
	if err != nil || fi.Size() < 64<<20 || fi.Size() > 64<<20+512 {
		t.Fatalf("spill file %s: %v, %d bytes; want the 64 MiB spill limit and a note", p, err, fi.Size())
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	note := make([]byte, 512)
	n, _ := f.ReadAt(note, 32<<20)
	f.Close()
	if want := fmt.Sprintf("%d bytes dropped here", 1<<30-64<<20); !strings.Contains(string(note[:n]), want) {
		t.Errorf("spill file after its first 32 MiB = %q; want a note %q", note[:n], want)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("spill file mode %v; want 0600", fi.Mode().Perm())
	}
	os.Remove(p)
	// 50,000 kept bytes of NULs are \u0000 escapes in JSON: six characters each.
	if len(out) > 6*50_000+10_000 {
		t.Errorf("--json result is %d bytes; want it bounded", len(out))
	}
}

// watchPeakRSS follows the high-water RSS (VmHWM) of the process pid until it exits and
// returns a function that stops watching and reports the last reading in KiB. VmHWM belongs
// to the process's own address space; rusage's ru_maxrss does not serve here, because Go
// starts children with CLONE_VM|CLONE_VFORK and the kernel folds the parent's (the test
// binary's) high-water RSS into the child's ru_maxrss at execve.
func watchPeakRSS(pid int) func() int64 {
	var (
		mu   sync.Mutex
		peak int64
	)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if kib, ok := vmHWM(pid); ok {
				mu.Lock()
				peak = max(peak, kib)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// vmHWM reads VmHWM (KiB) from /proc/pid/status; ok is false once the process has gone.
func vmHWM(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// TestInterruptKillsTheTree: Ctrl-C during a command exits 130 and leaves nothing running.
func TestInterruptKillsTheTree(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	marker := strconv.Itoa(int(time.Now().UnixNano()%1_000_000) + 3_000_000)
	cmd := e.command(t, "exec", "-c", "sleep "+marker+" & sh -c 'sleep "+marker+"' & echo started; wait")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "started\n" {
		t.Fatalf("first line %q", line)
	}
	cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit code after Ctrl-C = %d (%v); want 130", code, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output()
		if len(strings.TrimSpace(string(out))) == 0 {
			break
		}
		if time.Now().After(deadline) {
			exec.Command("pkill", "-f", "sleep "+marker).Run()
			t.Fatalf("processes still running after Ctrl-C: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
