//go:build !windows

package singularity

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustExec(t *testing.T, s sandbox.Session, script string) *sandbox.Result {
	t.Helper()
	res, err := s.Exec(ctxFor(t), sandbox.Command{Script: script})
	if err != nil {
		t.Fatalf("Exec(%q) error = %v", script, err)
	}
	return res
}

func open(t *testing.T, b *Backend, name string) *session {
	t.Helper()
	s, err := b.Open(ctxFor(t), name)
	if err != nil {
		t.Fatalf("Open(%q) = %v", name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*session)
}

// runFake runs the fake runtime directly, as something outside hermes-sandbox would.
func (f *fake) run(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(f.exe, args...)
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fake %q: %v: %s", args, err, out)
	}
}

func countCalls(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// TestRecreatedAfterInstanceVanished: an instance stopped behind the backend's back is
// started again on the next command, whose result says the environment was recreated.
func TestRecreatedAfterInstanceVanished(t *testing.T) {
	setup := newFakeSetup(t)
	b := setup.backend(t)
	s := open(t, b, "vanish")
	if res := mustExec(t, s, "export HERMES_V=1"); res.EnvironmentRecreated {
		t.Errorf("first command says environment_recreated")
	}
	exited := s.helperExited()
	setup.fake.run(t, "instance", "stop", b.instanceName("vanish"))
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("helper still running 10s after its instance stopped")
	}
	res := mustExec(t, s, `echo "${HERMES_V-unset}"`)
	if !res.EnvironmentRecreated || res.Stdout != "unset\n" {
		t.Errorf("after the instance vanished: recreated=%v stdout=%q; want true, unset", res.EnvironmentRecreated, res.Stdout)
	}
	if res := mustExec(t, s, "true"); res.EnvironmentRecreated {
		t.Errorf("environment_recreated reported twice")
	}
	// A new process finds the stopped session's record and says so too.
	exited = s.helperExited()
	setup.fake.run(t, "instance", "stop", b.instanceName("vanish"))
	<-exited
	s2 := open(t, setup.backend(t), "vanish")
	if res := mustExec(t, s2, "true"); !res.EnvironmentRecreated {
		t.Errorf("new process after the instance vanished: environment_recreated = false")
	}
}

// TestEnvironment: the sandbox sees exactly the passthrough names with their values (quotes
// and newlines intact), none of this process's environment, nothing injected through
// APPTAINERENV_*, and no value appears on a runtime command line.
func TestEnvironment(t *testing.T) {
	setup := newFakeSetup(t)
	t.Setenv("HERMES_HOST_ONLY", "leak")
	t.Setenv("APPTAINERENV_HERMES_INJECTED", "leak")
	value := "it's \"q\" $(x)\nline2"
	setup.environ = []string{"HERMES_PASS=" + value, "SECRET_TOKEN=nope"}
	setup.tweak = func(c *config.Config) { c.Terminal.EnvPassthrough = []string{"HERMES_PASS"} }
	s := open(t, setup.backend(t), "env")
	res := mustExec(t, s, `printf '%s|%s|%s|%s' "$HERMES_PASS" "${SECRET_TOKEN-none}" "${HERMES_HOST_ONLY-none}" "${HERMES_INJECTED-none}"`)
	if want := value + "|none|none|none"; res.Stdout != want {
		t.Errorf("sandbox environment = %q; want %q", res.Stdout, want)
	}
	for _, c := range setup.fake.calls(t) {
		if strings.Contains(c, "line2") || strings.Contains(c, "nope") {
			t.Errorf("runtime command line carries a value: %q", c)
		}
	}
}

// TestRemoteImageConvertedOnce: a docker:// image is built into the cache once and reused by
// every later session and process.
func TestRemoteImageConvertedOnce(t *testing.T) {
	setup := newFakeSetup(t)
	setup.tweak = func(c *config.Config) { c.Singularity.Image = "docker://alpine:3.20" }
	b := setup.backend(t)
	mustExec(t, open(t, b, "img1"), "true")
	mustExec(t, open(t, b, "img2"), "true")
	mustExec(t, open(t, setup.backend(t), "img3"), "true")
	calls := setup.fake.calls(t)
	if n := countCalls(calls, "build "); n != 1 {
		t.Errorf("build ran %d times; want 1 (calls %q)", n, calls)
	}
	cached := filepath.Join(setup.state, Name, "images", cachedImageName("docker://alpine:3.20"))
	if _, err := os.Stat(cached); err != nil {
		t.Errorf("cached SIF: %v", err)
	}
	for _, c := range calls {
		if strings.HasPrefix(c, "instance start") && !strings.Contains(c, " "+cached+" ") {
			t.Errorf("instance start without the cached SIF: %q", c)
		}
	}
}

func TestRemoteImageBuildFails(t *testing.T) {
	setup := newFakeSetup(t)
	setup.tweak = func(c *config.Config) { c.Singularity.Image = "docker://no/such:image" }
	t.Setenv("FAKE_BUILD_FAIL", "1")
	_, err := open(t, setup.backend(t), "bad").Exec(ctxFor(t), sandbox.Command{Script: "true"})
	var re *runtimeError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "build failed") {
		t.Errorf("Exec with an unbuildable image error = %v; want the runtime's build error", err)
	}
	entries, _ := os.ReadDir(filepath.Join(setup.state, Name, "images"))
	if len(entries) != 0 {
		t.Errorf("failed build left %d file(s) in the cache", len(entries))
	}
}

// TestConcurrentStartWaitsForReadiness: while one process starts a session's instance, the
// runtime already lists it; the other processes that open the session at that moment wait for
// the start to finish instead of attaching to an instance that is not ready, and only one
// `instance start` runs.
func TestConcurrentStartWaitsForReadiness(t *testing.T) {
	setup := newFakeSetup(t)
	t.Setenv("FAKE_START_DELAY", "0.5")
	const n = 4
	ctx := ctxFor(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		b := setup.backend(t) // a backend each, as separate processes would have
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess, err := b.Open(ctx, "racing")
			if err != nil {
				errs <- err
				return
			}
			defer sess.Close()
			res, err := sess.Exec(ctx, sandbox.Command{Script: fmt.Sprintf("echo %d >> /mnt/seen", i)})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			if err != nil {
				errs <- fmt.Errorf("process %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c := countCalls(setup.fake.calls(t), "instance start"); c != 1 {
		t.Errorf("instance start ran %d times; want 1", c)
	}
	res := mustExec(t, open(t, setup.backend(t), "racing"), "wc -l < /mnt/seen")
	if got := strings.TrimSpace(res.Stdout); got != fmt.Sprint(n) {
		t.Errorf("lines written in the shared instance = %q; want %d", got, n)
	}
}

// TestPidsLimitRefused: where the host cannot limit an unprivileged instance's processes,
// the instance starts without the limit, the backend stops asking, and Warnings says so.
func TestPidsLimitRefused(t *testing.T) {
	setup := newFakeSetup(t)
	t.Setenv("FAKE_NO_PIDS_LIMIT", "1")
	b := setup.backend(t)
	mustExec(t, open(t, b, "nolimit1"), "true")
	mustExec(t, open(t, b, "nolimit2"), "true")
	if n := countCalls(setup.fake.calls(t), "instance start"); n != 3 {
		t.Errorf("instance start ran %d times; want 3 (refused once, then without the limit)", n)
	}
	if w := strings.Join(b.Warnings(), "\n"); !strings.Contains(w, "pids limit") {
		t.Errorf("Warnings() = %q; want the missing pids limit", w)
	}
}

// TestSessionsAndRemove: a session whose instance stopped is listed as stopped and can be
// removed; removing it again is ErrNotFound.
func TestSessionsAndRemove(t *testing.T) {
	setup := newFakeSetup(t)
	b := setup.backend(t)
	s := open(t, b, "listed")
	mustExec(t, s, "true")
	exited := s.helperExited()
	setup.fake.run(t, "instance", "stop", b.instanceName("listed"))
	<-exited
	list, err := b.Sessions(ctxFor(t))
	if err != nil || len(list) != 1 || list[0].Name != "listed" || list[0].State != "stopped" {
		t.Fatalf("Sessions() = %+v, %v; want listed, stopped", list, err)
	}
	if err := b.Remove(ctxFor(t), "listed"); err != nil {
		t.Fatalf("Remove = %v", err)
	}
	if err := b.Remove(ctxFor(t), "listed"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("second Remove = %v; want ErrNotFound", err)
	}
	if _, err := os.Stat(b.sessionDir("listed")); !os.IsNotExist(err) {
		t.Errorf("session directory left after Remove: %v", err)
	}
}

// TestExecutableLookup: singularity.executable wins; else apptainer, else singularity on
// PATH; with neither, Check says what to install.
func TestExecutableLookup(t *testing.T) {
	ap, sg := newFake(t, "apptainer"), newFake(t, "singularity")
	cfg := config.NewConfig()
	cfg.Singularity.Image = testImage(t)
	newB := func() *Backend {
		b, err := New(cfg.Singularity, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir()}))
		if err != nil {
			t.Fatal(err)
		}
		return b.(*Backend)
	}
	tests := []struct {
		path, want string
	}{
		{filepath.Dir(sg.exe) + ":" + filepath.Dir(ap.exe), ap.exe},
		{filepath.Dir(sg.exe), sg.exe},
	}
	for _, tt := range tests {
		t.Setenv("PATH", tt.path+":/usr/bin:/bin")
		if got, err := newB().executable(ctxFor(t)); err != nil || got != tt.want {
			t.Errorf("executable() with PATH %s = %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
	cfg.Singularity.Executable = sg.exe
	t.Setenv("PATH", filepath.Dir(ap.exe)+":/usr/bin:/bin")
	if got, err := newB().executable(ctxFor(t)); err != nil || got != sg.exe {
		t.Errorf("executable() with singularity.executable = %q, %v; want %q", got, err, sg.exe)
	}
	cfg.Singularity.Executable = ""
	t.Setenv("PATH", t.TempDir())
	err := newB().Check(ctxFor(t))
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "install apptainer (https://apptainer.org) or set singularity.executable") {
		t.Errorf("Check() without a runtime = %v; want ErrUnavailable with install advice", err)
	}
}

func TestConfigErrors(t *testing.T) {
	testenv.AgentBinary(t)
	cfg := config.NewConfig()
	b, _ := New(cfg.Singularity, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir()}))
	if _, err := b.Open(ctxFor(t), "s"); !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "singularity.image") {
		t.Errorf("Open without an image = %v; want ErrInvalidConfig naming singularity.image", err)
	}
	cfg.Singularity.Image = filepath.Join(t.TempDir(), "missing.sif")
	cfg.Singularity.Executable = newFake(t, "apptainer").exe
	b, _ = New(cfg.Singularity, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir()}))
	if err := b.(*Backend).Check(ctxFor(t)); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Check with a missing SIF = %v; want ErrNotFound", err)
	}
	if _, err := New(cfg.Singularity, cfg.BackendOptions(sandbox.FactoryOptions{})); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("New without a state directory = %v; want ErrInvalidConfig", err)
	}
}
