//go:build unix

package cli_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/internal/owner"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// ownerPids lists the session owners started for this test's directory.
func (e *env) ownerPids(t *testing.T) []string {
	t.Helper()
	out, _ := exec.Command("pgrep", "-f", "owner-serve --socket "+e.dir+"/").Output()
	var live []string
	for _, p := range strings.Fields(string(out)) {
		if processRuns(p) {
			live = append(live, p)
		}
	}
	return live
}

func (e *env) ownersDir() string { return filepath.Join(e.dir, "state", "hermes-sandbox", "owners") }

// execBin runs the binary and returns its exit code, stdout and stderr.
func (e *env) execBin(t *testing.T, stdin string, extraEnv []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := e.command(t, args...)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("run %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// warmOwner runs two execs, which start the environment's owner, and checks it runs.
func (e *env) warmOwner(t *testing.T) {
	t.Helper()
	e.execBin(t, "", nil, "exec", "--", "true")
	e.execBin(t, "", nil, "exec", "--", "true")
	if len(e.ownerPids(t)) != 1 {
		t.Fatal("no owner after the second exec")
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOwnerServesLaterExecs: the first exec starts one owner on a private socket; later execs
// reach it, and behave as a run in their own process does (state, exit codes, stdin, the
// per-call environment, the audit log).
func TestOwnerServesLaterExecs(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	if code, _, errOut := e.execBin(t, "", nil, "exec", "-c", "cd /tmp && export OWNED=yes"); code != 0 {
		t.Fatalf("first exec: %d %s", code, errOut)
	}
	if pids := e.ownerPids(t); len(pids) != 0 {
		t.Fatalf("owners after the first exec: %v; want none until a second exec with this environment", pids)
	}
	if code, _, errOut := e.execBin(t, "", nil, "exec", "--", "true"); code != 0 {
		t.Fatalf("second exec: %d %s", code, errOut)
	}
	pids := e.ownerPids(t)
	if len(pids) != 1 {
		t.Fatalf("owners after the second exec: %v; want one", pids)
	}
	socks, _ := filepath.Glob(filepath.Join(e.ownersDir(), "*.sock"))
	if len(socks) != 1 {
		t.Fatalf("owner sockets: %v; want one", socks)
	}
	if fi, err := os.Stat(socks[0]); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("owner socket %s: %v %v; want a socket of mode 0600", socks[0], fi.Mode(), err)
	}
	if fi, err := os.Stat(e.ownersDir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("owners directory: %v %v; want mode 0700", fi.Mode(), err)
	}
	code, out, errOut := e.execBin(t, "", nil, "exec", "-c", "pwd; echo $OWNED")
	if code != 0 || out != "/tmp\nyes\n" {
		t.Errorf("state through the owner: %d %q %q; want /tmp and yes", code, out, errOut)
	}
	if code, _, _ := e.execBin(t, "", nil, "exec", "--", "sh", "-c", "exit 7"); code != 7 {
		t.Errorf("exit code through the owner = %d; want 7", code)
	}
	if code, out, _ := e.execBin(t, "piped input\n", nil, "exec", "--", "cat"); code != 0 || out != "piped input\n" {
		t.Errorf("stdin through the owner: %d %q", code, out)
	}
	for range 2 {
		if code, out, _ := e.execBin(t, "", []string{"HERMES_SANDBOX_TERMINAL_TIMEOUT=1s"}, "exec", "-c", "sleep 30"); code != 124 {
			t.Errorf("an environment override (timeout 1s): exit %d %q; want 124", code, out)
		}
	}
	// The calls with another environment went to an owner of their own.
	if got := e.ownerPids(t); len(got) != 2 || !slicesContain(got, pids[0]) {
		t.Errorf("owners now %v; want the first (%s) and one for the other environment", got, pids[0])
	}
	var n int
	for _, r := range auditRecords(t, e) {
		if r.Type == audit.TypeResult {
			n++
		}
	}
	if n != 7 {
		t.Errorf("audit results = %d; want one per exec (7)", n)
	}
	if out := e.mustRun("audit", "verify"); !strings.Contains(out, "ok") {
		t.Errorf("audit verify = %q", out)
	}
	// A session removed by another process is not served warm afterwards.
	if code, out, errOut := e.execBin(t, "", nil, "sessions", "rm", "default"); code != 0 {
		t.Fatalf("sessions rm: %d %s %s", code, out, errOut)
	}
	code, out, errOut = e.execBin(t, "", nil, "exec", "-c", "echo \"[$OWNED]\"; pwd")
	if code != 0 || strings.Contains(out, "yes") || strings.Contains(out, "/tmp\n") || strings.Contains(errOut, "warning") {
		t.Errorf("after sessions rm, through the owner: %d %q %q; want a fresh session", code, out, errOut)
	}
}

func slicesContain(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestOwnerConfigIsReadEachCall: an owner applies the configuration as it is at each call,
// and terminal.keep_alive 0 sends calls back to their own process and ends the owner.
func TestOwnerConfigIsReadEachCall(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.warmOwner(t)
	e.mustRun("config", "set", "terminal.timeout", "1s")
	if code, _, errOut := e.execBin(t, "", nil, "exec", "-c", "sleep 30"); code != 124 {
		t.Errorf("after terminal.timeout 1s: exit %d %q; want 124", code, errOut)
	}
	e.mustRun("config", "set", "terminal.keep_alive", "0")
	if code, out, errOut := e.execBin(t, "", nil, "exec", "-c", "echo here"); code != 0 || out != "here\n" || strings.Contains(errOut, "warning") {
		t.Errorf("with keep_alive 0: %d %q %q; want it run quietly in its own process", code, out, errOut)
	}
	waitFor(t, "the owner to exit after keep_alive 0", 15*time.Second, func() bool { return len(e.ownerPids(t)) == 0 })
	e.execBin(t, "", nil, "exec", "--", "true")
	if got := e.ownerPids(t); len(got) != 0 {
		t.Errorf("keep_alive 0 still started owners: %v", got)
	}
}

// TestOwnerNotForChangingEnvironments: a caller whose environment changes at every call
// starts no owners (it would leave one idle owner per call).
func TestOwnerNotForChangingEnvironments(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	for i := range 4 {
		if code, out, errOut := e.execBin(t, "", []string{"REQUEST_ID=" + strconv.Itoa(i)}, "exec", "-c", "echo $REQUEST_ID"); code != 0 || out != "" && out != "\n" {
			t.Errorf("exec %d: %d %q %q", i, code, out, errOut)
		}
	}
	if got := e.ownerPids(t); len(got) != 0 {
		t.Errorf("owners for four environments seen once each: %v; want none", got)
	}
}

// TestOwnerExitsWhenIdle: an owner ends after terminal.keep_alive without calls, and removes
// its socket.
func TestOwnerExitsWhenIdle(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("config", "set", "terminal.keep_alive", "1s")
	e.warmOwner(t)
	waitFor(t, "the idle owner to exit", 20*time.Second, func() bool { return len(e.ownerPids(t)) == 0 })
	if socks, _ := filepath.Glob(filepath.Join(e.ownersDir(), "*.sock")); len(socks) != 0 {
		t.Errorf("sockets left after the owner exited: %v", socks)
	}
}

// TestOwnerTenFirstExecs: ten simultaneous first execs all succeed, share one session (and
// at most one owner: the later ones may start it) and every export is kept.
func TestOwnerTenFirstExecs(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	var wg sync.WaitGroup
	errs := make([]string, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, errOut := e.execBin(t, "", nil, "exec", "-c", "export V"+strconv.Itoa(i)+"="+strconv.Itoa(i))
			if code != 0 || strings.Contains(errOut, "warning") {
				errs[i] = strconv.Itoa(code) + " " + errOut
			}
		}()
	}
	wg.Wait()
	for i, msg := range errs {
		if msg != "" {
			t.Errorf("first exec %d: %s", i, msg)
		}
	}
	if got := e.ownerPids(t); len(got) > 1 {
		t.Errorf("owners after ten first execs: %v; want at most one", got)
	}
	_, out, _ := e.execBin(t, "", nil, "exec", "-c", "env | grep -c '^V[0-9]='")
	if strings.TrimSpace(out) != "10" {
		t.Errorf("exports kept: %q; want 10", out)
	}
}

// TestOwnerKilledCallerKillsCommand: kill -9 of the exec process ends its command's tree in
// the owner, and the owner records the call's end in the audit log.
func TestOwnerKilledCallerKillsCommand(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.warmOwner(t)
	marker := strconv.Itoa(int(time.Now().UnixNano()%1_000_000) + 4_000_000)
	cmd := e.command(t, "exec", "-c", "sleep "+marker+" & sh -c 'sleep "+marker+"' & echo started; wait")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "started\n" {
		cmd.Process.Kill()
		t.Fatalf("first line %q", line)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	t.Cleanup(func() { exec.Command("pkill", "-f", "sleep "+marker).Run() })
	waitFor(t, "the killed caller's command to end", 15*time.Second, func() bool {
		out, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output()
		return len(strings.TrimSpace(string(out))) == 0
	})
	waitFor(t, "the owner to record the call's end", 15*time.Second, func() bool {
		intent := int64(-1)
		for _, r := range auditRecords(t, e) {
			if r.Type == audit.TypeIntent && strings.Contains(r.Command, marker) {
				intent = r.Seq
			}
			if r.Type == audit.TypeResult && r.Intent == intent {
				return true
			}
		}
		return false
	})
	if len(e.ownerPids(t)) != 1 {
		t.Error("the owner did not outlive its killed caller")
	}
}

// TestOwnerDiesMidCommandExitsReserved: when the session owner dies under a running command,
// exec exits 125 (sandbox.ExitRunnerFailed), never a code the command itself could have
// returned, and says why.
func TestOwnerDiesMidCommandExitsReserved(t *testing.T) {
	if owner.ExitLost != sandbox.ExitRunnerFailed {
		t.Fatalf("owner.ExitLost = %d; want sandbox.ExitRunnerFailed (%d)", owner.ExitLost, sandbox.ExitRunnerFailed)
	}
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.warmOwner(t)
	pids := e.ownerPids(t)
	cmd := e.command(t, "exec", "-c", "echo started; sleep 60; exit 1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "started\n" {
		cmd.Process.Kill()
		t.Fatalf("first line %q", line)
	}
	for _, p := range pids {
		if pid, err := strconv.Atoi(p); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != sandbox.ExitRunnerFailed || !strings.Contains(errb.String(), "session owner went away") {
		t.Errorf("exec under a killed owner: exit %d, %q; want %d and the reason", code, errb.String(), sandbox.ExitRunnerFailed)
	}
}

// TestExecOwnFailureExitsReserved: exec's own failures (here a configuration it cannot use)
// exit 125, not 1, so they are never taken for the command's exit status.
func TestExecOwnFailureExitsReserved(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.dir, "config", "hermes-sandbox", "config.yaml")
	os.MkdirAll(filepath.Dir(path), 0o700)
	os.WriteFile(path, []byte("terminal:\n  backend: local\n  timeout: forever\n"), 0o600)
	if code, _, errOut := e.run("", "exec", "-c", "true"); code != sandbox.ExitRunnerFailed || !strings.Contains(errOut, "timeout") {
		t.Errorf("exec with a bad config: exit %d, %q; want %d", code, errOut, sandbox.ExitRunnerFailed)
	}
	if code, _, _ := e.run("", "--sandbox", "local", "policy", "check", "rm -rf /srv/build"); code != 1 {
		t.Errorf("policy check of a dangerous command: exit %d; want 1 (only exec and shell use 125)", code)
	}
}
