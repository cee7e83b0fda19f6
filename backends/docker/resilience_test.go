//go:build unix

package docker

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/versions"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// scopeObjects counts the containers and volumes of b's state directory.
func scopeObjects(t *testing.T, b *Backend) (containers, volumes int) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	f := client.Filters{}.Add("label", labelScope+"="+b.scope)
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	vols, err := b.cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items), len(vols.Items)
}

// helperOf returns the session's current helper client.
func helperOf(t *testing.T, sess sandbox.Session) *agent.Client {
	t.Helper()
	c, err := sess.(*session).Client(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// execStarted runs script in the background after printing a line, and returns once that
// line has arrived (so the command is running), with the channel that gets Exec's error.
func execStarted(t *testing.T, sess sandbox.Session, script string) <-chan error {
	t.Helper()
	started := make(chan struct{})
	var once sync.Once
	out := writerFunc(func(p []byte) (int, error) { once.Do(func() { close(started) }); return len(p), nil })
	errc := make(chan error, 1)
	go func() {
		_, err := sess.Exec(context.Background(), sandbox.Command{Script: "echo started; " + script, Stdout: out})
		errc <- err
	}()
	select {
	case <-started:
	case err := <-errc:
		t.Fatalf("Exec(%q) ended before it started: %v", script, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("Exec(%q) printed nothing in 30s", script)
	}
	return errc
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// waitLost waits until a helper stream has ended.
func waitLost(t *testing.T, c *agent.Client) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(15 * time.Second):
		t.Fatalf("the helper stream did not end after the container stopped")
	}
}

func TestBadInputs(t *testing.T) {
	img := testImage(t)
	tests := []struct {
		name  string
		mut   func(*config.Config)
		want  []string
		is    error
		where string // "open" or "exec"
	}{
		{"MissingImage", func(c *config.Config) { c.Docker.Image = "hermes-sandbox-test/no-such-image:1" },
			[]string{"hermes-sandbox image pull hermes-sandbox-test/no-such-image:1", "hermes-sandbox image import"}, sandbox.ErrNotFound, "exec"},
		{"MissingNamedUser", func(c *config.Config) { c.Docker.User = "ghost" },
			[]string{`docker.user "ghost" does not exist in the image`, "1000:1000"}, sandbox.ErrInvalidConfig, "exec"},
		{"MissingGroup", func(c *config.Config) { c.Docker.User = "sandbox:ghosts" },
			[]string{`group "ghosts" does not exist`}, sandbox.ErrInvalidConfig, "exec"},
		{"MemoryTooSmall", func(c *config.Config) { c.Docker.MemoryLimit = 8 * config.Mebibyte },
			[]string{"docker.memory_limit 8m is below", "16m"}, sandbox.ErrInvalidConfig, "open"},
		{"MissingVolumePath", func(c *config.Config) { c.Docker.Volumes = []string{"/no/such/hermes/dir:/data"} },
			[]string{"/no/such/hermes/dir does not exist"}, sandbox.ErrInvalidConfig, "open"},
		{"UnknownRuntime", func(c *config.Config) { c.Docker.Runtime = "hermes-no-such-runtime" },
			[]string{"hermes-no-such-runtime"}, nil, "exec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackendWith(t, t.TempDir(), func(c *config.Config) { c.Docker.Image = img; tt.mut(c) })
			start := time.Now()
			sess, err := b.Open(ctxT(t, time.Minute), "bad")
			if err == nil {
				defer sess.Close()
				_, err = sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "echo hi"})
				if tt.where == "open" {
					t.Errorf("Open succeeded; want the error before anything is created")
				}
			}
			if err == nil {
				t.Fatalf("Exec succeeded; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q; want it to mention %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error = %v; want errors.Is %v", err, tt.is)
			}
			t.Logf("error: %v", err)
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %v", d)
			}
			if c, v := scopeObjects(t, b); c != 0 || v != 0 {
				t.Errorf("left %d containers and %d volumes behind", c, v)
			}
			if ch := b.Check(ctxT(t, 30*time.Second)); ch == nil {
				t.Errorf("Check() = nil; want it to report the problem")
			}
		})
	}
}

func TestCheck(t *testing.T) {
	b := newBackend(t, nil)
	if err := b.Check(ctxT(t, 30*time.Second)); err != nil {
		t.Errorf("Check() = %v; want nil", err)
	}
	// The client negotiated down to the engine's API version (Docker 20.10 speaks 1.41).
	v, err := b.cli.ServerVersion(ctxT(t, 10*time.Second), client.ServerVersionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.cli.ClientVersion(); versions.LessThan(v.APIVersion, client.MaxAPIVersion) && got != v.APIVersion {
		t.Errorf("ClientVersion() = %s; want the engine's %s", got, v.APIVersion)
	}
	t.Logf("engine %s speaks API %s; the client uses %s", v.Version, v.APIVersion, b.cli.ClientVersion())
	missing := newBackend(t, func(c *config.Config) { c.Docker.Image = "hermes-sandbox-test/absent:0" })
	if err := missing.Check(ctxT(t, 30*time.Second)); !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "image import") {
		t.Errorf("Check(missing image) = %v; want ErrNotFound naming image pull and import", err)
	}
}

func TestEngineUnreachable(t *testing.T) {
	needEngine(t)
	testenv.AgentBinary(t)
	sock := filepath.Join(t.TempDir(), "nothing.sock")
	b := newBackendWith(t, t.TempDir(), func(c *config.Config) { c.Docker.Host = "unix://" + sock; c.Docker.Image = "x" })
	want := "docker: cannot reach the engine at unix://" + sock + ": is the daemon running? (hermes-sandbox doctor)"
	if err := b.Check(ctxT(t, 10*time.Second)); err == nil || err.Error() != want || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Check() = %v; want %q wrapping ErrUnavailable", err, want)
	}
	sess := open(t, b, "down")
	_, err := sess.Exec(ctxT(t, 10*time.Second), sandbox.Command{Script: "true"})
	if err == nil || err.Error() != want {
		t.Errorf("Exec() = %v; want %q", err, want)
	}
}

// TestContextHost checks that the current docker context is followed.
func TestContextHost(t *testing.T) {
	dir := t.TempDir()
	name := "hermes-test-ctx"
	id := fmt.Sprintf("%x", sha256Sum(name))
	os.MkdirAll(filepath.Join(dir, "contexts", "meta", id), 0o755)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"currentContext":"`+name+`"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "contexts", "meta", id, "meta.json"), []byte(`{"Name":"`+name+`","Endpoints":{"docker":{"Host":"unix:///ctx/docker.sock"}}}`), 0o644)
	opts := sandbox.FactoryOptions{StateDir: t.TempDir(), Environ: []string{"DOCKER_CONFIG=" + dir}}
	ep, err := resolveEndpoint("", opts)
	if err != nil || ep.Host != "unix:///ctx/docker.sock" {
		t.Errorf("resolveEndpoint(context) = %+v, %v; want unix:///ctx/docker.sock", ep, err)
	}
	opts.Environ = append(opts.Environ, "DOCKER_HOST=tcp://127.0.0.1:2375")
	if ep, _ := resolveEndpoint("", opts); ep.Host != "tcp://127.0.0.1:2375" {
		t.Errorf("resolveEndpoint(DOCKER_HOST) = %q; want DOCKER_HOST to win over the context", ep.Host)
	}
	if ep, _ := resolveEndpoint("unix:///cfg.sock", opts); ep.Host != "unix:///cfg.sock" {
		t.Errorf("resolveEndpoint(docker.host) = %q; want docker.host to win", ep.Host)
	}
	opts.Environ = []string{"DOCKER_CONFIG=" + t.TempDir()}
	if ep, _ := resolveEndpoint("", opts); ep.Host != defaultHost {
		t.Errorf("resolveEndpoint(nothing) = %q; want %q", ep.Host, defaultHost)
	}
}

func TestForkBombContained(t *testing.T) {
	b := newBackend(t, nil)
	sess := open(t, b, "forkbomb")
	run(t, sess, "true")
	res, err := sess.Exec(ctxT(t, 2*time.Minute), sandbox.Command{Script: `bomb() { bomb | bomb & }; bomb; sleep 100`, Timeout: 5 * time.Second})
	switch {
	case err != nil && b.engine().gvisor:
		// On gVisor's ptrace platform a bomb may outgrow the host's pids.max for gVisor's
		// threads; its kernel then stops (engine.go). The host bound must be what held, the
		// error must say so, and the session must come back below.
		if want := fmt.Sprintf("host pids.max (%d,", gvisorHostPids(b.cfg.PidsLimit)); !strings.Contains(err.Error(), want) {
			t.Fatalf("Exec(fork bomb) under gVisor error = %v; want the sandbox stopped at %q", err, want)
		}
		t.Logf("gVisor's kernel stopped at the host's task bound: %v", err)
	case err != nil:
		t.Fatalf("Exec(fork bomb) error = %v", err)
	case res.ExitCode != sandbox.ExitTimeout || !strings.Contains(res.Stderr, "can't fork"):
		t.Errorf("fork bomb = exit %d (stderr %.200q); want 124 and fork failures", res.ExitCode, res.Stderr)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "echo alive; cat /sys/fs/cgroup/pids.current 2>/dev/null || cat /sys/fs/cgroup/pids/pids.current"})
		if err == nil && strings.HasPrefix(r.Stdout, "alive\n") {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(r.Stdout, "alive\n")))
			if n < 20 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session after the fork bomb: %v %v", r, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestMemoryBomb(t *testing.T) {
	b := newBackend(t, func(c *config.Config) { c.Docker.MemoryLimit = 64 * config.Mebibyte })
	sess := open(t, b, "membomb")
	res, err := sess.Exec(ctxT(t, 2*time.Minute), sandbox.Command{Script: `awk 'BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) { s = s s } }'`, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Exec(memory bomb) error = %v", err)
	}
	if res.ExitCode != 137 || !strings.Contains(res.Stderr, "ran out of memory") {
		t.Errorf("memory bomb = exit %d stderr %q; want 137 and an out-of-memory message", res.ExitCode, res.Stderr)
	}
	if r := run(t, sess, "echo alive"); r.Stdout != "alive\n" || r.EnvironmentRecreated {
		t.Errorf("after the memory bomb = %q recreated %v", r.Stdout, r.EnvironmentRecreated)
	}
	// A plain SIGKILL is not reported as memory.
	if r := run(t, sess, "kill -9 $$"); r.ExitCode != 137 || strings.Contains(r.Stderr, "memory") {
		t.Errorf("kill -9 = %d %q; want 137 without a memory message", r.ExitCode, r.Stderr)
	}
}

func rss() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

func TestOutputFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GiB of output")
	}
	b := newBackend(t, nil)
	sess := open(t, b, "flood")
	run(t, sess, "true")
	runtime.GC()
	base := rss()
	var peak int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if r := rss(); r > peak {
				peak = r
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	const size = 1 << 30
	start := time.Now()
	res, err := sess.Exec(ctxT(t, 5*time.Minute), sandbox.Command{Script: fmt.Sprintf("head -c %d /dev/zero; echo end", size)})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(res.OutputFile) })
	t.Logf("1 GiB in %v; RSS %d MiB before, peak %d MiB", time.Since(start).Round(time.Millisecond), base>>20, peak>>20)
	// The kept output is the limit plus the marker, which names the capped spill file.
	if res.StdoutBytes != size+4 || !res.Truncated || len(res.Stdout) > sandbox.DefaultOutputLimit+300 {
		t.Errorf("result: %d bytes, truncated %v, kept %d", res.StdoutBytes, res.Truncated, len(res.Stdout))
	}
	// The spill file is capped at the default spill limit: the first and last halves of the
	// output, and a note of the gap.
	spill, err := os.ReadFile(res.OutputFile)
	switch {
	case err != nil:
		t.Errorf("spill file %q: %v", res.OutputFile, err)
	case len(spill) < sandbox.DefaultSpillLimit || len(spill) > sandbox.DefaultSpillLimit+512 || !strings.HasSuffix(string(spill), "\x00end\n") ||
		!strings.Contains(string(spill[sandbox.DefaultSpillLimit/2:sandbox.DefaultSpillLimit/2+512]), fmt.Sprintf("%d bytes dropped here", size+4-sandbox.DefaultSpillLimit)):
		t.Errorf("spill file %q: %d bytes; want the %d-byte spill limit with its tail and a note of the gap", res.OutputFile, len(spill), sandbox.DefaultSpillLimit)
	}
	if grow := peak - base; grow > 64<<20 {
		t.Errorf("RSS grew by %d MiB during 1 GiB of output; want at most 64 MiB", grow>>20)
	}
}

func TestKilledContainerRecovers(t *testing.T) {
	b := newBackend(t, nil)
	sess := open(t, b, "killed")
	run(t, sess, "cd /tmp && export HERMES_X=1 && echo keep > /workspace/file")
	helper := helperOf(t, sess)
	ctx := ctxT(t, time.Minute)
	if _, err := b.cli.ContainerKill(ctx, b.containerName("killed"), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	waitLost(t, helper)
	res := run(t, sess, `pwd; echo "${HERMES_X-unset}"; cat /workspace/file`)
	if !res.EnvironmentRecreated || res.Stdout != "/workspace\nunset\nkeep\n" {
		t.Errorf("after kill = %q recreated %v; want a fresh shell, the workspace kept, environment_recreated", res.Stdout, res.EnvironmentRecreated)
	}
	if res := run(t, sess, "true"); res.EnvironmentRecreated {
		t.Errorf("environment_recreated reported twice")
	}
	// Killed in the middle of a command: the command fails at once, with a clear error.
	errc := execStarted(t, sess, "sleep 100")
	if _, err := b.cli.ContainerKill(ctx, b.containerName("killed"), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, agent.ErrConnLost) || !strings.Contains(err.Error(), "stopped") {
			t.Errorf("Exec while the container is killed = %v; want a lost-connection error saying the container stopped", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Exec hangs after its container was killed")
	}
	if res := run(t, sess, "echo back"); res.Stdout != "back\n" || !res.EnvironmentRecreated {
		t.Errorf("after the second kill = %q recreated %v", res.Stdout, res.EnvironmentRecreated)
	}
}

func TestRemovedContainerRecovers(t *testing.T) {
	b := newBackend(t, nil)
	sess := open(t, b, "removed")
	run(t, sess, "cd /tmp && export HERMES_X=1 && echo kept > /workspace/f")
	helper := helperOf(t, sess)
	ctx := ctxT(t, time.Minute)
	old, _ := b.inspect(ctx, b.containerName("removed"))
	if _, err := b.cli.ContainerRemove(ctx, old.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	waitLost(t, helper)
	res := run(t, sess, `pwd; echo "${HERMES_X-unset}"; cat /workspace/f`)
	if !res.EnvironmentRecreated || res.Stdout != "/workspace\nunset\nkept\n" {
		t.Errorf("after removal = %q recreated %v", res.Stdout, res.EnvironmentRecreated)
	}
	now, _ := b.inspect(ctx, b.containerName("removed"))
	if now.ID == old.ID || now.ID == "" {
		t.Errorf("container not recreated")
	}
	// A new process (a second CLI run) sees the new container as the session's own.
	b2 := newBackendWith(t, b.opts.StateDir, func(c *config.Config) { c.Docker = b.cfg })
	s2 := open(t, b2, "removed")
	if res := run(t, s2, "pwd"); res.EnvironmentRecreated {
		t.Errorf("second process reports environment_recreated")
	}
}

func TestPID1KilledFromInside(t *testing.T) {
	b := newBackend(t, nil)
	sess := open(t, b, "pid1")
	if b.cfg.Runtime == "runsc" {
		// gVisor lets a process in the container SIGKILL its PID 1 (Linux ignores it): the
		// container stops, and the next command starts it again.
		if _, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "kill -9 1; sleep 30"}); err == nil || !errors.Is(err, agent.ErrConnLost) {
			t.Errorf("under runsc, Exec(kill -9 1) = %v; want a lost-connection error", err)
		}
		if res := run(t, sess, "echo back"); res.Stdout != "back\n" || !res.EnvironmentRecreated {
			t.Errorf("under runsc, after kill -9 1 = %q recreated %v", res.Stdout, res.EnvironmentRecreated)
		}
	} else if res := run(t, sess, "kill -9 1; echo still"); res.Stdout != "still\n" {
		t.Errorf("kill -9 1 = %q; want it ignored", res.Stdout)
	}
	start := time.Now()
	_, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "kill 1; sleep 30"})
	if err == nil || !errors.Is(err, agent.ErrConnLost) || time.Since(start) > 20*time.Second {
		t.Errorf("Exec(kill 1) = %v after %v; want a lost-connection error, soon", err, time.Since(start))
	}
	t.Logf("error: %v", err)
	if res := run(t, sess, "echo back"); res.Stdout != "back\n" || !res.EnvironmentRecreated {
		t.Errorf("after PID 1 ended = %q recreated %v", res.Stdout, res.EnvironmentRecreated)
	}
}

func TestHelperFilesDeleted(t *testing.T) {
	b := newBackend(t, nil)
	sess := open(t, b, "rmstate")
	run(t, sess, "mkdir -p /workspace/sub && cd /workspace/sub && export HERMES_K=v")
	run(t, sess, "rm -rf /tmp/.hermes /tmp/* 2>/dev/null; true")
	if res := run(t, sess, `pwd; echo "$HERMES_K"`); res.Stdout != "/workspace/sub\nv\n" {
		t.Errorf("after deleting the helper's files = %q", res.Stdout)
	}
	if res := run(t, sess, "cd /; echo ok"); res.Stdout != "ok\n" || res.Cwd != "/" {
		t.Errorf("state saving after deletion = %q %q", res.Stdout, res.Cwd)
	}
}

func TestClosedStdout(t *testing.T) {
	b := newBackend(t, nil)
	sess := open(t, b, "closedout")
	start := time.Now()
	res := run(t, sess, "exec >&- 2>&-; sleep 1; exit 3")
	if res.ExitCode != 3 || time.Since(start) > 15*time.Second {
		t.Errorf("closed stdout = %d after %v; want 3 after about 1s", res.ExitCode, time.Since(start))
	}
	res, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "exec >&- 2>&-; sleep 100", Timeout: time.Second})
	if err != nil || res.ExitCode != sandbox.ExitTimeout {
		t.Errorf("closed stdout with timeout = %v, %v; want 124", res, err)
	}
}

// proxy stands in for the engine's socket so a test can make the engine vanish.
type proxy struct {
	path, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
	wg           sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{path: filepath.Join(t.TempDir(), "engine.sock"), target: target, conns: map[net.Conn]bool{}}
	p.start(t)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start(t *testing.T) {
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(up, c); up.Close() }()
			go func() { defer p.wg.Done(); io.Copy(c, up); c.Close() }()
		}
	}()
}

// stop closes the listener and every connection, like an engine that stopped.
func (p *proxy) stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	p.wg.Wait()
	os.Remove(p.path)
}

func TestEngineStopsMidCommand(t *testing.T) {
	needEngine(t)
	target := strings.TrimPrefix(os.Getenv("DOCKER_HOST"), "unix://")
	if target == "" {
		target = "/var/run/docker.sock"
	}
	if _, err := os.Stat(target); err != nil {
		t.Skipf("needs the engine's unix socket: %v", err)
	}
	p := newProxy(t, target)
	img := testImage(t)
	b := newBackendWith(t, t.TempDir(), func(c *config.Config) { c.Docker.Image = img; c.Docker.Host = "unix://" + p.path })
	sess := open(t, b, "enginestop")
	run(t, sess, "cd /tmp && export HERMES_E=1")
	errc := execStarted(t, sess, "sleep 3091")
	p.stop()
	select {
	case err := <-errc:
		if !errors.Is(err, agent.ErrConnLost) {
			t.Errorf("Exec when the engine stopped = %v; want a lost-connection error", err)
		}
		t.Logf("error: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("Exec hangs after the engine stopped")
	}
	_, err := sess.Exec(ctxT(t, 30*time.Second), sandbox.Command{Script: "true"})
	if want := "cannot reach the engine at unix://" + p.path; err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Exec while the engine is down = %v; want %q", err, want)
	}
	p.start(t)
	res := run(t, sess, `pwd; echo "$HERMES_E"; n=0; for q in /proc/[0-9]*; do tr '\0' ' ' < $q/cmdline 2>/dev/null | grep -q 'sleep 309[1]' && n=$((n+1)); done; echo $n`)
	if res.Stdout != "/tmp\n1\n0\n" || res.EnvironmentRecreated {
		t.Errorf("after the engine came back = %q recreated %v; want state kept and the sleep gone", res.Stdout, res.EnvironmentRecreated)
	}
}

func sha256Sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// TestRepeatedTimeouts checks the known failure: killing only the client side of a command
// leaves its process tree running until the pids limit is exhausted. Here each timeout kills
// the tree inside the container.
func TestRepeatedTimeouts(t *testing.T) {
	b := newBackend(t, func(c *config.Config) { c.Docker.PidsLimit = 64 })
	sess := open(t, b, "timeouts")
	pids := func() int {
		res := run(t, sess, "cat /sys/fs/cgroup/pids.current 2>/dev/null || cat /sys/fs/cgroup/pids/pids.current")
		n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
		return n
	}
	before := pids()
	for i := 0; i < 40; i++ {
		res, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "sleep 100 & sleep 100 & sh -c 'sleep 100' & wait", Timeout: 100 * time.Millisecond})
		if err != nil || res.ExitCode != sandbox.ExitTimeout {
			t.Fatalf("timeout %d = %v, %v", i, res, err)
		}
	}
	if after := pids(); after == 0 || after > before+3 {
		t.Errorf("pids.current (tasks, threads included) = %d before and %d after 40 timeouts; want no growth", before, after)
	}
}

// TestForkBombOutlastsGVisorBound: on gVisor's ptrace platform a sustained fork bomb grows
// gVisor's host tasks past any bound (engine.go). The host's pids.max must still hold it, the
// error must say what happened, and the session's next command must restart the sandbox with
// its workspace.
func TestForkBombOutlastsGVisorBound(t *testing.T) {
	b := newBackend(t, nil)
	sess := open(t, b, "gvbomb")
	run(t, sess, "echo kept > /workspace/mark")
	if !b.engine().gvisor {
		t.Skip("needs docker.runtime runsc (HERMES_SANDBOX_TEST_DOCKER_RUNTIME=runsc)")
	}
	res, err := sess.Exec(ctxT(t, 2*time.Minute), sandbox.Command{Script: `bomb() { bomb | bomb & }; bomb; sleep 100`, Timeout: 45 * time.Second})
	want := fmt.Sprintf("host pids.max (%d,", gvisorHostPids(b.cfg.PidsLimit))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("45 s fork bomb under gVisor = %+v, %v; want gVisor stopped at %q", res, err, want)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "cat /workspace/mark"})
		if err == nil && r.Stdout == "kept\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session after gVisor stopped: %+v %v", r, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestWorkspaceVolumeLabelled: a session's workspace volume carries the scope's labels on
// every engine (Podman 4.3 drops them from a volume a container's mount creates, podmanVolume),
// so gc and clean-up find it.
func TestWorkspaceVolumeLabelled(t *testing.T) {
	for _, limit := range []config.Size{0, 10 * config.Gibibyte} {
		if limit > 0 && testRootless {
			continue // a rootless engine cannot see the bounded workspaces
		}
		b := newBackend(t, func(c *config.Config) { c.Docker.DiskLimit = limit })
		run(t, open(t, b, "labelled"), "true")
		if _, vols := scopeObjects(t, b); vols != 1 {
			t.Errorf("docker.disk_limit %s: %d workspace volumes carry the scope's label; want 1", limit, vols)
		}
	}
}
