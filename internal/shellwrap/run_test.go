package shellwrap

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// localSh is a Provider that runs processes on this machine, as a sandbox would.
type localSh struct {
	home  string
	calls []string // argv[2] of each Start: the script run
}

type localProc struct{ cmd *exec.Cmd }

func (p *localSh) Start(ctx context.Context, c Call) (Process, error) {
	p.calls = append(p.calls, c.Argv[2])
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + p.home}
	for k, v := range c.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return localProc{cmd}, nil
}

func (p localProc) Wait(ctx context.Context) (int, error) {
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, err
}

func (p *localSh) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return os.ReadFile(path)
}

func (p *localSh) WriteFile(ctx context.Context, path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func newLocal(t *testing.T) (*localSh, Options) {
	t.Helper()
	p := &localSh{home: t.TempDir()}
	return p, Options{Backend: "test", Session: "s1", Dir: filepath.Join(t.TempDir(), "fallback"), SpillDir: t.TempDir()}
}

func runOK(t *testing.T, p Provider, o Options, cmd sandbox.Command) *sandbox.Result {
	t.Helper()
	res, err := Run(t.Context(), p, o, cmd)
	if err != nil {
		t.Fatalf("Run(%q %q) = %v", cmd.Script, cmd.Argv, err)
	}
	return res
}

func TestRunStateAndStreams(t *testing.T) {
	p, o := newLocal(t)
	dir := t.TempDir()
	res := runOK(t, p, o, sandbox.Command{Script: "echo out; echo err >&2; cd " + dir + " && export A='x y'; L=1; exit 4"})
	if res.ExitCode != 4 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.Cwd != dir || res.StateNotSaved {
		t.Errorf("Run = %d %q %q cwd %q unsaved %v; want 4, out, err, %q, saved", res.ExitCode, res.Stdout, res.Stderr, res.Cwd, res.StateNotSaved, dir)
	}
	res = runOK(t, p, o, sandbox.Command{Script: `pwd; echo "$A|${L-unset}|$ONE|$SEED"`, Env: map[string]string{"ONE": "1"}})
	if want := dir + "\nx y|unset|1|\n"; res.Stdout != want {
		t.Errorf("state = %q; want %q", res.Stdout, want)
	}
	o.PassEnv = map[string]string{"SEED": "seeded", "A": "not-the-state"}
	res = runOK(t, p, o, sandbox.Command{Script: `echo "${ONE-once}|$SEED|$A"`})
	if res.Stdout != "once|seeded|x y\n" {
		t.Errorf("after a per-command variable, with PassEnv = %q; want once|seeded|x y (the state wins over PassEnv)", res.Stdout)
	}
	res = runOK(t, p, o, sandbox.Command{Argv: []string{"printf", "%s|", "a b", "c'd", "$(x)", "\n"}, Dir: "/"})
	if res.Stdout != "a b|c'd|$(x)|\n|" || res.Cwd != "/" {
		t.Errorf("argv with Dir / = %q cwd %q; want the words, in /", res.Stdout, res.Cwd)
	}
	res = runOK(t, p, o, sandbox.Command{Script: "cat", Stdin: strings.NewReader("in\x00put")})
	if res.Stdout != "in\x00put" {
		t.Errorf("stdin = %q", res.Stdout)
	}
	if _, err := Run(t.Context(), p, o, sandbox.Command{}); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("empty command = %v; want ErrInvalidConfig", err)
	}
	if _, err := Run(t.Context(), p, o, sandbox.Command{Script: "true", Env: map[string]string{"A-B": "x"}}); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("bad env name = %v; want ErrInvalidConfig", err)
	}
}

func TestRunStateNotSaved(t *testing.T) {
	p, o := newLocal(t)
	runOK(t, p, o, sandbox.Command{Script: "cd /tmp && export K=kept"})
	res := runOK(t, p, o, sandbox.Command{Script: "cd / && export K=lost; __hermes_st=/nonexistent-hermes-dir/state"})
	if !res.StateNotSaved || res.StateError == "" || res.ExitCode != 0 {
		t.Errorf("unwritable state = exit %d, not saved %v %q; want 0, true and a reason", res.ExitCode, res.StateNotSaved, res.StateError)
	}
	if res = runOK(t, p, o, sandbox.Command{Script: `pwd; echo "$K"`}); res.Stdout != "/tmp\nkept\n" {
		t.Errorf("after a failed save = %q; want the state from before", res.Stdout)
	}
}

func TestRunMaxArgv(t *testing.T) {
	p, o := newLocal(t)
	o.MaxArgv = 8 << 10
	big := strings.Repeat("a", 10_000)
	res := runOK(t, p, o, sandbox.Command{Script: "x='" + big + "'; echo ${#x}"})
	if res.Stdout != "10000\n" {
		t.Errorf("long script = %q; want 10000", res.Stdout)
	}
	if _, err := Run(t.Context(), p, o, sandbox.Command{Argv: []string{"echo", big}}); !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "8192") {
		t.Errorf("long argv = %v; want ErrInvalidConfig naming 8192", err)
	}
}

// gone reports whether pid has ended (it is gone, or a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	return strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "Z")
}

// waitGone polls until pid has ended, for up to 10 s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !gone(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunTimeoutAndCancelKillTree(t *testing.T) {
	p, o := newLocal(t)
	pidf := filepath.Join(t.TempDir(), "bg")
	script := "setsid sleep 3001 & echo $! >" + pidf + "; sleep 3002; echo not-reached"
	res, err := Run(t.Context(), p, o, sandbox.Command{Script: script, Timeout: 500 * time.Millisecond})
	if err != nil || res.ExitCode != sandbox.ExitTimeout || !res.TimedOut || strings.Contains(res.Stdout, "not-reached") {
		t.Fatalf("timeout = %+v, %v; want exit 124", res, err)
	}
	if !strings.Contains(p.calls[len(p.calls)-1], "kill -KILL") {
		t.Errorf("last call = %q; want the kill", p.calls[len(p.calls)-1])
	}
	b, err := os.ReadFile(pidf)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitGone(t, pid)

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	res, err = Run(ctx, p, o, sandbox.Command{Script: "sleep 3003"})
	if !errors.Is(err, context.Canceled) || res == nil || res.ExitCode != sandbox.ExitInterrupted || !res.Interrupted {
		t.Fatalf("cancel = %+v, %v; want exit 130 and context.Canceled", res, err)
	}
}

func TestEnv(t *testing.T) {
	env, err := Env(map[string]string{"P": "p", "B": "base"}, map[string]string{"B": "cmd", "A": "a"})
	if err != nil || env["B"] != "cmd" || env["P"] != "p" || env["HERMES_FB_CMDENV"] != "A B" {
		t.Errorf("Env = %v, %v; want B=cmd, P=p, HERMES_FB_CMDENV=A B", env, err)
	}
	if env, _ = Env(nil, nil); len(env) != 0 {
		t.Errorf("Env(nil, nil) = %v; want empty", env)
	}
	if _, err = Env(nil, map[string]string{"1X": ""}); err == nil {
		t.Errorf("Env(1X) = nil error; want one")
	}
}

// reporting is a Provider whose processes report their own end (StateProcess) and kill their
// own tree (Killer), as a provider does that reads the wrapper's files in the sandbox: here
// under HOME, since Options.Dir is relative to it.
type reporting struct {
	*localSh
	kills int
}

type reportingProc struct {
	localProc
	p    *reporting
	call Call
}

func (p *reporting) Start(ctx context.Context, c Call) (Process, error) {
	c.Env["HERMES_FB_NODIR"] = filepath.Join(p.home, c.PidFile+".nodir")
	proc, err := p.localSh.Start(ctx, c)
	if err != nil {
		return nil, err
	}
	return &reportingProc{proc.(localProc), p, c}, nil
}

func (p *reportingProc) WaitState(ctx context.Context) (Exit, error) {
	code, err := p.Wait(ctx)
	e := Exit{Code: code}
	cwd, _ := os.ReadFile(filepath.Join(p.p.home, p.call.State+".cwd"))
	_, pidErr := os.Stat(filepath.Join(p.p.home, p.call.PidFile))
	_, noDirErr := os.Stat(filepath.Join(p.p.home, p.call.PidFile+".nodir"))
	e.Cwd, e.Unsaved, e.NoDir = string(cwd), pidErr == nil, noDirErr == nil
	return e, err
}

func (p *reportingProc) Kill(ctx context.Context) {
	p.p.kills++
	exec.Command("/bin/sh", "-c", KillTree, "sh", filepath.Join(p.p.home, p.call.PidFile)).Run()
}

func (p *reporting) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return nil, errors.New("ReadFile(" + path + "): a StateProcess's state is not read back")
}

// TestRunStateProcess: a process that reports its end feeds Result (directory, unsaved state,
// missing directory) with no file read back, a relative Options.Dir is under $HOME, and a
// Killer kills its own tree on a timeout.
func TestRunStateProcess(t *testing.T) {
	local, o := newLocal(t)
	p := &reporting{localSh: local}
	o.Dir = ".hermes/fallback"
	dir := t.TempDir()
	res := runOK(t, p, o, sandbox.Command{Script: "cd " + dir + " && export K=kept"})
	if res.Cwd != dir || res.StateNotSaved {
		t.Errorf("Run = cwd %q unsaved %v; want %q, saved", res.Cwd, res.StateNotSaved, dir)
	}
	if _, err := os.Stat(filepath.Join(local.home, o.Dir, o.Session+".env")); err != nil {
		t.Errorf("state file under HOME: %v", err)
	}
	if res = runOK(t, p, o, sandbox.Command{Script: `pwd; echo "$K"`}); res.Stdout != dir+"\nkept\n" {
		t.Errorf("state across commands = %q; want %q, kept", res.Stdout, dir)
	}
	res = runOK(t, p, o, sandbox.Command{Script: "cd / && __hermes_st=/nonexistent-hermes-dir/state"})
	if !res.StateNotSaved || res.StateError == "" {
		t.Errorf("unwritable state = not saved %v %q; want true and a reason", res.StateNotSaved, res.StateError)
	}
	if _, err := Run(t.Context(), p, o, sandbox.Command{Script: "true", Dir: "/nonexistent-hermes-dir"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("missing Dir = %v; want ErrNotFound", err)
	}
	pidf := filepath.Join(t.TempDir(), "bg")
	res, err := Run(t.Context(), p, o, sandbox.Command{Script: "setsid sleep 3004 & echo $! >" + pidf + "; sleep 3005",
		Timeout: 500 * time.Millisecond})
	if err != nil || res.ExitCode != sandbox.ExitTimeout || p.kills != 1 || res.Cwd != dir {
		t.Fatalf("timeout = %+v, %v, %d kills; want exit 124, one kill, cwd %q", res, err, p.kills, dir)
	}
	b, err := os.ReadFile(pidf)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitGone(t, pid)
}
