package daytona

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// waitState polls the fake until the sandbox named name is in state want.
func waitState(t *testing.T, f *fakeDaytona, name, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for f.state(name) != want {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is %q after a minute; want %q", name, f.state(name), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func removeAtEnd(t *testing.T, b *Backend, names ...string) {
	t.Cleanup(func() {
		for _, n := range names {
			b.Remove(context.Background(), n)
		}
	})
}

// TestReuseAcrossProcesses: a second backend on the same state directory (a later CLI
// process) finds the session's sandbox by name, with its files, cwd and variables.
func TestReuseAcrossProcesses(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	state := t.TempDir()
	b1 := newBackend(t, f, state, nil)
	removeAtEnd(t, b1, "reuse")
	s1 := open(t, b1, "reuse")
	run(t, s1, "mkdir -p /tmp/reuse && cd /tmp/reuse && echo kept > f && export REUSE=yes")
	s1.Close()
	b1.Close()

	b2 := newBackend(t, f, state, nil)
	s2 := open(t, b2, "reuse")
	res := run(t, s2, "cat f; echo $REUSE")
	if res.Stdout != "kept\nyes\n" || res.Cwd != "/tmp/reuse" || res.EnvironmentRecreated {
		t.Errorf("second process: %q cwd %q recreated %v; want kept/yes in /tmp/reuse, not recreated", res.Stdout, res.Cwd, res.EnvironmentRecreated)
	}
	if n := f.count("createSandbox"); n != 1 {
		t.Errorf("createSandbox called %d times; want 1 (the second process must find the sandbox)", n)
	}
	list, err := b2.Sessions(ctxT(t, time.Minute))
	if err != nil || len(list) != 1 || list[0].Name != "reuse" || list[0].State != "started" {
		t.Errorf("Sessions() = %+v, %v; want the started session reuse", list, err)
	}
}

// TestHibernateWake: a stopped sandbox is started by the next command, which then runs;
// files persist and the result does not claim a new environment. An archived one is
// restored likewise.
func TestHibernateWake(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), nil)
	removeAtEnd(t, b, "sleepy")
	sess := open(t, b, "sleepy")
	run(t, sess, "echo dream > ~/note")
	name := b.sandboxName("sleepy")
	for _, how := range []string{"stopped", "archived"} {
		sb, err := b.api.get(ctxT(t, time.Minute), name)
		if err != nil {
			t.Fatal(err)
		}
		// Not waiting for "stopped": the command arrives while the stop is in progress,
		// and the start it needs is refused with 409 until then.
		stopSeen(t, b, sess, sb.ID)
		if how == "archived" {
			waitState(t, f, name, "stopped")
			if _, err := b.api.action(ctxT(t, time.Minute), sb.ID, "archive"); err != nil {
				t.Fatal(err)
			}
			waitState(t, f, name, "archived")
		}
		starts := f.count("startSandbox")
		res := run(t, sess, "cat ~/note")
		if res.ExitCode != 0 || res.Stdout != "dream\n" || res.EnvironmentRecreated {
			t.Errorf("after %s: %d %q recreated %v; want the file back, not recreated", how, res.ExitCode, res.Stdout, res.EnvironmentRecreated)
		}
		if f.count("startSandbox") == starts {
			t.Errorf("after %s: no start was asked for", how)
		}
		if got := f.state(name); got != "started" {
			t.Errorf("after %s: state %q; want started", how, got)
		}
	}
	// The helper removed while the sandbox slept: the wake notices at once and installs it.
	run(t, sess, "rm -f ~/.hermes-sandbox/agent-*")
	sb, _ := b.api.get(ctxT(t, time.Minute), name)
	stopSeen(t, b, sess, sb.ID)
	uploads := f.count("UploadFile")
	if res := run(t, sess, "cat ~/note"); res.Stdout != "dream\n" {
		t.Errorf("after losing the helper: %q; want the file", res.Stdout)
	}
	if f.count("UploadFile") == uploads {
		t.Error("the lost helper was not uploaded again")
	}
}

// stopSeen stops the sandbox id and waits until sess has seen its helper stream end. A
// command already in flight when a sandbox stops fails (it may have run); the wake tests
// are about the next command.
func stopSeen(t *testing.T, b *Backend, sess sandbox.Session, id string) {
	t.Helper()
	client, err := sess.(*session).Client(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.stopSandbox(ctxT(t, time.Minute), id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-client.Done():
	case <-time.After(time.Minute):
		t.Fatal("the helper stream outlived the sandbox's stop by a minute")
	}
}

// TestAutoStop: auto_stop is always sent, in minutes, never 0; on the fake's scaled clock an
// idle sandbox stops by itself and the next command wakes it with its files.
func TestAutoStop(t *testing.T) {
	f := newFake(t, testImage(t), time.Second)
	b := newBackend(t, f, t.TempDir(), func(c *config.Config) { c.Daytona.AutoStop = 90 * time.Second })
	removeAtEnd(t, b, "idle")
	sess := open(t, b, "idle")
	run(t, sess, "echo still > ~/here")
	bodies := f.createBodies()
	if len(bodies) != 1 || bodies[0]["autoStopInterval"] != float64(2) {
		t.Fatalf("create bodies = %v; want one with autoStopInterval 2 (90s rounded up to whole minutes)", bodies)
	}
	if v := bodies[0]["autoDeleteInterval"]; v != float64(-1) {
		t.Errorf("autoDeleteInterval = %v; want -1 (off) by default", v)
	}
	// An open channel counts as activity; once the session lets go, the sandbox sleeps.
	sess.Close()
	waitState(t, f, b.sandboxName("idle"), "stopped")
	sess2 := open(t, b, "idle")
	res := run(t, sess2, "cat ~/here")
	if res.Stdout != "still\n" || res.EnvironmentRecreated {
		t.Errorf("after auto-stop: %q recreated %v; want the file, not recreated", res.Stdout, res.EnvironmentRecreated)
	}

	cfg := config.NewConfig()
	cfg.Daytona.AutoStop = 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "daytona.auto_stop") {
		t.Errorf("Validate() with auto_stop 0 = %v; want an error naming daytona.auto_stop", err)
	}
	b0 := newBackend(t, f, t.TempDir(), func(c *config.Config) { c.Daytona.AutoStop = 0 })
	if _, err := b0.Open(ctxT(t, time.Minute), "never"); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("Open with auto_stop 0 = %v; want ErrInvalidConfig", err)
	}
}

// TestDestroyedIsRecreated: a sandbox deleted behind the session's back is made anew, and
// the result says so.
func TestDestroyedIsRecreated(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	state := t.TempDir()
	b := newBackend(t, f, state, nil)
	removeAtEnd(t, b, "gone")
	sess := open(t, b, "gone")
	if res := run(t, sess, "echo x > ~/f"); res.EnvironmentRecreated {
		t.Fatal("a new session reports environment_recreated")
	}
	sb, err := b.api.get(ctxT(t, time.Minute), b.sandboxName("gone"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.deleteSandbox(ctxT(t, time.Minute), sb.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, f, b.sandboxName("gone"), "")
	// The open session notices the lost stream; a new process notices by its record.
	res, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "cat ~/f 2>/dev/null || echo fresh"})
	if err != nil {
		res, err = sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "cat ~/f 2>/dev/null || echo fresh"})
	}
	if err != nil || res.Stdout != "fresh\n" || !res.EnvironmentRecreated {
		t.Errorf("after delete: %+v, %v; want a fresh sandbox and environment_recreated", res, err)
	}
	if n := f.count("createSandbox"); n != 2 {
		t.Errorf("createSandbox called %d times; want 2", n)
	}
}

// TestConcurrentSessionsDistinct: sessions opened at once get their own sandboxes, with
// distinct names, and never share files.
func TestConcurrentSessionsDistinct(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), nil)
	const n = 3
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("par-%d", i)
	}
	removeAtEnd(t, b, names...)
	var wg sync.WaitGroup
	outs := make([]string, n)
	errs := make([]error, n)
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess, err := b.Open(ctxT(t, time.Minute), name)
			if err != nil {
				errs[i] = err
				return
			}
			defer sess.Close()
			res, err := sess.Exec(ctxT(t, 2*time.Minute), sandbox.Command{Script: "ls ~/mark-* 2>/dev/null; echo " + name + " > ~/mark-" + name + "; hostname"})
			if err != nil {
				errs[i] = err
				return
			}
			outs[i] = res.Stdout
		}()
	}
	wg.Wait()
	hosts := map[string]bool{}
	for i := range names {
		if errs[i] != nil {
			t.Fatalf("session %s: %v", names[i], errs[i])
		}
		if strings.Contains(outs[i], "mark-") {
			t.Errorf("session %s saw another session's file: %q", names[i], outs[i])
		}
		hosts[strings.TrimSpace(outs[i])] = true
	}
	if len(hosts) != n {
		t.Errorf("hostnames %v; want %d distinct sandboxes", hosts, n)
	}
	seen := map[any]bool{}
	for _, body := range f.createBodies() {
		seen[body["name"]] = true
	}
	if len(seen) != n {
		t.Errorf("created names %v; want %d distinct", seen, n)
	}
}

// TestCredentialErrors: no key, a rejected key (naming where it came from), and the
// provider's variables honoured.
func TestCredentialErrors(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), func(c *config.Config) { c.Daytona.APIKey = "" })
	if _, err := b.Open(ctxT(t, time.Minute), "nokey"); !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "setup daytona") {
		t.Errorf("Open without a key = %v; want ErrInvalidConfig pointing at setup daytona", err)
	}
	bad := newBackend(t, f, t.TempDir(), func(c *config.Config) { c.Daytona.APIKey = "dtn_wrong" })
	sess := open(t, bad, "badkey")
	_, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "true"})
	if !errors.Is(err, sandbox.ErrDenied) || !strings.Contains(err.Error(), "rejected the API key from secrets.yaml") {
		t.Errorf("Exec with a wrong key = %v; want ErrDenied saying where the key came from", err)
	}
	if err := bad.Check(ctxT(t, time.Minute)); !errors.Is(err, sandbox.ErrDenied) {
		t.Errorf("Check with a wrong key = %v; want ErrDenied", err)
	}
	// DAYTONA_API_KEY and DAYTONA_API_URL from the caller's environment.
	cfg := config.NewConfig()
	env, err := NewWith(cfg.Daytona, sandbox.FactoryOptions{StateDir: t.TempDir(),
		Environ: []string{"DAYTONA_API_KEY=" + f.key, "DAYTONA_API_URL=" + f.apiURL()}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Check(ctxT(t, time.Minute)); err != nil {
		t.Errorf("Check with DAYTONA_API_KEY/DAYTONA_API_URL = %v; want nil", err)
	}
	if env.keySource != "from DAYTONA_API_KEY" {
		t.Errorf("key source = %q; want from DAYTONA_API_KEY", env.keySource)
	}
	if env.apiURL != f.apiURL() {
		t.Errorf("api url = %q; want %q from DAYTONA_API_URL", env.apiURL, f.apiURL())
	}
	if def, _ := NewWith(cfg.Daytona, sandbox.FactoryOptions{StateDir: t.TempDir()}, Options{}); def.apiURL != DefaultAPIURL {
		t.Errorf("default api url = %q; want %q", def.apiURL, DefaultAPIURL)
	}
}

// TestConflicts: 409 while a state change is in progress is waited out; a sandbox that
// holds the session's name but is not ours is never reused.
func TestConflicts(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), nil)
	removeAtEnd(t, b, "clash", "busy")

	// Someone else's sandbox with our name.
	other := b.labels("clash")
	other[labelOwner] = "mallory@elsewhere"
	other[labelScope] = "0000000000"
	if _, err := b.api.create(ctxT(t, time.Minute), createSandbox{Name: b.sandboxName("clash"), Labels: other, AutoStopInterval: 15, AutoDeleteInterval: -1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sb, err := b.api.get(context.Background(), b.sandboxName("clash")); err == nil {
			b.deleteSandbox(context.Background(), sb.ID)
		}
	})
	sess := open(t, b, "clash")
	_, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "true"})
	if !errors.Is(err, sandbox.ErrDenied) || !strings.Contains(err.Error(), "never reused") {
		t.Errorf("Exec on a name held by another owner = %v; want ErrDenied, never reused", err)
	}
	if err := b.Remove(ctxT(t, time.Minute), "clash"); !errors.Is(err, sandbox.ErrDenied) {
		t.Errorf("Remove of another owner's sandbox = %v; want ErrDenied", err)
	}

	// Starts refused with 409 (and a 503 on the way) are retried until the deadline.
	s2 := open(t, b, "busy")
	run(t, s2, "true")
	sb, _ := b.api.get(ctxT(t, time.Minute), b.sandboxName("busy"))
	if err := b.stopSandbox(ctxT(t, time.Minute), sb.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, f, b.sandboxName("busy"), "stopped")
	f.injectStatus("startSandbox", http.StatusConflict, http.StatusConflict)
	f.injectStatus("getSandbox", http.StatusServiceUnavailable)
	res, err := s2.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "echo awake"})
	if err != nil || res.Stdout != "awake\n" {
		t.Errorf("Exec through 409s = %v, %v; want awake", res, err)
	}
	if n := f.count("startSandbox"); n < 3 {
		t.Errorf("startSandbox called %d times; want at least 3 (two 409s, then a start)", n)
	}

	// gc stops this scope's idle sandboxes and never touches another owner's.
	s2.Close()
	rep, err := b.Collect(ctxT(t, time.Minute), sandbox.GCOptions{IdleTimeout: time.Nanosecond})
	if err != nil || len(rep.Removed) != 1 || rep.Removed[0].Name != b.sandboxName("busy") {
		t.Errorf("Collect() = %+v, %v; want only %s stopped", rep, err, b.sandboxName("busy"))
	}
	waitState(t, f, b.sandboxName("busy"), "stopped")
	if got := f.state(b.sandboxName("clash")); got != "started" {
		t.Errorf("another owner's sandbox is %q after gc; want it untouched (started)", got)
	}
}

// TestUnknownCompletionNotRerun: a toolbox command that got no usable answer is not sent
// again; the session works on the next call.
func TestUnknownCompletionNotRerun(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), nil)
	removeAtEnd(t, b, "once")
	sess := open(t, b, "once")
	f.injectStatus("ExecuteCommand", http.StatusBadGateway)
	before := f.count("ExecuteCommand")
	if _, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "true"}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Exec with the toolbox failing = %v; want ErrUnavailable", err)
	}
	if n := f.count("ExecuteCommand") - before; n != 1 {
		t.Errorf("process/execute sent %d times; want once (never re-run)", n)
	}
	if res := run(t, sess, "echo ok"); res.Stdout != "ok\n" {
		t.Errorf("next Exec = %q; want ok", res.Stdout)
	}
}

// TestUnknownCompletionNotRerunSessions: over toolbox sessions, a command whose start is
// unknown (the toolbox's proxy answered 502) is sent once, killed in case it started, and
// the session works afterwards.
func TestUnknownCompletionNotRerunSessions(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), sessionChannel)
	removeAtEnd(t, b, "once")
	sess := open(t, b, "once")
	run(t, sess, "true")
	f.injectStatus("SessionExecuteCommand", http.StatusBadGateway)
	sent, kills := f.count("SessionExecuteCommand"), f.count("ExecuteCommand")
	if _, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "true"}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Exec with the toolbox failing = %v; want ErrUnavailable", err)
	}
	if n := f.count("SessionExecuteCommand") - sent; n != 1 {
		t.Errorf("session exec sent %d times; want once (never re-run)", n)
	}
	if n := f.count("ExecuteCommand") - kills; n != 1 {
		t.Errorf("%d kills through process/execute; want 1", n)
	}
	if res := run(t, sess, "echo ok"); res.Stdout != "ok\n" {
		t.Errorf("next Exec = %q; want ok", res.Stdout)
	}
}

// TestEnvPassthroughAndTimeout: terminal.env_passthrough reaches commands (inside the
// protocol, not in the create request), and a timeout kills the command's tree while the
// sandbox keeps running.
func TestEnvPassthroughAndTimeout(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	t.Run("helper", func(t *testing.T) { testEnvPassthroughAndTimeout(t, f, nil) })
	t.Run("session", func(t *testing.T) { testEnvPassthroughAndTimeout(t, f, sessionChannel) })
}

func testEnvPassthroughAndTimeout(t *testing.T, f *fakeDaytona, mut func(*config.Config)) {
	b := newBackend(t, f, t.TempDir(), mut)
	b.opts.EnvPassthrough = []string{"HERMES_PASS_TEST"}
	b.opts.Environ = append(b.opts.Environ, "HERMES_PASS_TEST=secret-ish value")
	removeAtEnd(t, b, "pass")
	sess := open(t, b, "pass")
	if res := run(t, sess, `printf '%s' "$HERMES_PASS_TEST"`); res.Stdout != "secret-ish value" {
		t.Errorf("passthrough = %q; want the caller's value", res.Stdout)
	}
	if res := run(t, sess, `HERMES_PASS_TEST=changed; printf '%s' "$HERMES_PASS_TEST"`); res.Stdout != "changed" {
		t.Errorf("a changed passthrough value = %q", res.Stdout)
	}
	for _, body := range f.createBodies() {
		if fmt.Sprint(body["env"]) != "<nil>" && strings.Contains(fmt.Sprint(body["env"]), "secret-ish") {
			t.Errorf("create request carries the passed-through value: %v", body["env"])
		}
	}
	res, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "sleep 37 & sleep 38; echo no", Timeout: 300 * time.Millisecond})
	if err != nil || res.ExitCode != sandbox.ExitTimeout {
		t.Fatalf("timed-out Exec = %+v, %v; want exit 124", res, err)
	}
	if got := f.state(b.sandboxName("pass")); got != "started" {
		t.Errorf("sandbox state after a timeout = %q; want started", got)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := run(t, sess, "ps -o args | grep -c '^sleep 3[78]' || true")
		if strings.TrimSpace(res.Stdout) == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the timed-out command's processes are still there: %q", res.Stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLive runs the conformance checks that matter against real Daytona when a key is set.
func TestLive(t *testing.T) {
	key := os.Getenv("DAYTONA_API_KEY")
	if key == "" {
		t.Skip("set DAYTONA_API_KEY (and optionally DAYTONA_API_URL, HERMES_SANDBOX_DAYTONA_SNAPSHOT) to run against real Daytona")
	}
	for _, ch := range []config.DaytonaChannel{config.DaytonaChannelHelper, config.DaytonaChannelSession} {
		t.Run(string(ch), func(t *testing.T) {
			cfg := config.NewConfig()
			cfg.Daytona.Snapshot = os.Getenv("HERMES_SANDBOX_DAYTONA_SNAPSHOT")
			cfg.Daytona.Channel = ch
			b, err := NewWith(cfg.Daytona, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir(), Environ: os.Environ()}), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := b.Check(ctxT(t, time.Minute)); err != nil {
				t.Fatalf("Check() = %v", err)
			}
			sess := open(t, b, "live")
			defer b.Remove(context.Background(), "live")
			res, err := sess.Exec(ctxT(t, 5*time.Minute), sandbox.Command{Script: "echo out; echo err >&2; cd /tmp; exit 3"})
			if err != nil || res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.Cwd != "/tmp" {
				t.Errorf("live Exec = %+v, %v", res, err)
			}
			res, err = sess.Exec(ctxT(t, 5*time.Minute), sandbox.Command{Script: "printf 'a\\000b'; sleep 30", Timeout: 3 * time.Second})
			if err != nil || !res.TimedOut || res.Stdout != "a\x00b" {
				t.Errorf("live Exec with a timeout = %+v, %v; want a\\0b, timed out", res, err)
			}
		})
	}
}
