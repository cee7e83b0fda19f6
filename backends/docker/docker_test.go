//go:build unix

package docker

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	img := testImage(t)
	state := t.TempDir()
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend {
			return newBackendWith(t, state, func(c *config.Config) { c.Docker.Image = img })
		},
	})
}

// TestBranchingWritableRoot runs the Branching section on sessions whose root filesystem is
// writable (docker.read_only_rootfs false, as root), where a snapshot commits the container
// and a program installed under /usr/local/bin must reach the fork.
func TestBranchingWritableRoot(t *testing.T) {
	img := testImage(t)
	state := t.TempDir()
	sandboxtest.RunBranching(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend {
			return newBackendWith(t, state, func(c *config.Config) {
				c.Docker.Image = img
				c.Docker.ReadOnlyRootfs = false
				c.Docker.User = "0:0"
			})
		},
		InstallDir: "/usr/local/bin",
	})
}

// TestConformanceRealImage runs the suite on a realistic image (for example a debootstrap
// minbase with bash and python) named by HERMES_SANDBOX_TEST_DOCKER_IMAGE, when present.
func TestConformanceRealImage(t *testing.T) {
	img := os.Getenv("HERMES_SANDBOX_TEST_DOCKER_IMAGE")
	if img == "" {
		t.Skip("set HERMES_SANDBOX_TEST_DOCKER_IMAGE to an image on this engine to run the suite on it")
	}
	cli := needEngine(t)
	testenv.AgentBinary(t)
	if _, err := cli.ImageInspect(t.Context(), img); err != nil {
		t.Skipf("image %s: %v", img, err)
	}
	state := t.TempDir()
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend {
			return newBackendWith(t, state, func(c *config.Config) { c.Docker.Image = img })
		},
	})
}

func TestTerminal(t *testing.T) {
	b := newBackend(t, nil)
	sess := open(t, b, "tty")
	run(t, sess, "cd /tmp")
	term, ok := sess.(sandbox.Terminal)
	if !ok {
		t.Fatal("docker sessions do not implement sandbox.Terminal")
	}
	var out bytes.Buffer
	// A terminal's input stays open until the shell ends (an end of input hangs it up).
	in, typing := io.Pipe()
	go typing.Write([]byte("tty; pwd; exit 3\n"))
	defer typing.Close()
	code, err := term.Shell(ctxT(t, time.Minute), sandbox.TerminalOptions{Stdin: in, Stdout: &out,
		Size: sandbox.WinSize{Rows: 24, Cols: 80}})
	if err != nil || code != 3 || !strings.Contains(out.String(), "/dev/pts/") || !strings.Contains(out.String(), "/tmp") {
		t.Errorf("Shell() = %d, %v, output %q; want 3, a pty and /tmp", code, err, out.String())
	}
}

// TestEngineDetected checks that the backend knows which engine it talks to (Podman when
// HERMES_SANDBOX_TEST_PODMAN_SOCKET points the tests at it) and that doctor's line says so.
func TestEngineDetected(t *testing.T) {
	b := newBackend(t, nil)
	if err := b.Check(ctxT(t, time.Minute)); err != nil {
		t.Fatalf("Check() = %v", err)
	}
	e := b.engine()
	if e.podman != (testPodman != "") {
		t.Errorf("engine podman = %v with HERMES_SANDBOX_TEST_PODMAN_SOCKET %q", e.podman, testPodman)
	}
	want := "Docker Engine"
	if testPodman != "" {
		want = "Podman Engine"
		if iso := b.Capabilities().Isolation; !strings.Contains(iso, want) {
			t.Errorf("Isolation = %q; want it to name %s", iso, want)
		}
	}
	if d := b.Describe(); !strings.Contains(d, want) || !strings.Contains(d, "init: ") {
		t.Errorf("Describe() = %q; want the engine (%s) and its init", d, want)
	}
}

// TestPodmanInitPath reads containers.conf's init_path and finds catatonit only where it is.
func TestPodmanInitPath(t *testing.T) {
	dir := t.TempDir()
	initBin := filepath.Join(dir, "catatonit")
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte("[containers]\n# init_path = \"/nowhere\"\ninit_path = \""+initBin+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := confInitPath(conf); got != initBin {
		t.Errorf("confInitPath() = %q; want %q", got, initBin)
	}
	env := func(k string) (string, bool) {
		if k == "CONTAINERS_CONF" {
			return conf, true
		}
		return "", false
	}
	if got := podmanInitPath(env); got != "" {
		t.Errorf("podmanInitPath() = %q before catatonit exists; want none", got)
	}
	if err := os.WriteFile(initBin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := podmanInitPath(env); got != initBin {
		t.Errorf("podmanInitPath() = %q; want the configured %q", got, initBin)
	}
}

// TestPodmanRootless runs against an unprivileged user's Podman service
// (HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET): the backend sees it is rootless, and where that
// Podman cannot bound memory, CPU or processes (cgroup v1) it refuses the default limits with
// the reason instead of running without them, and runs hardened otherwise.
func TestPodmanRootless(t *testing.T) {
	if !testRootless {
		t.Skip("needs HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET (an unprivileged user's podman system service)")
	}
	def := config.NewConfig().Docker
	b := newBackend(t, func(c *config.Config) {
		c.Docker.MemoryLimit, c.Docker.CPUQuota, c.Docker.PidsLimit = def.MemoryLimit, def.CPUQuota, def.PidsLimit
	})
	if err := b.Check(ctxT(t, time.Minute)); err != nil && !strings.Contains(err.Error(), "rootless Podman on cgroup v1") {
		t.Fatalf("Check() = %v", err)
	}
	e := b.engine()
	if !e.podman || !e.rootless || !strings.Contains(b.Describe(), "(rootless") {
		t.Fatalf("engine = %+v, Describe() = %q; want rootless Podman", e, b.Describe())
	}
	sess := open(t, b, "rootless")
	res, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "true"})
	if e.noLimits {
		for _, want := range []string{"docker.memory_limit", "docker.cpu_quota", "docker.pids_limit", "cannot be enforced: rootless Podman on cgroup v1"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Exec with limits on rootless cgroup v1 = %+v, %v; want a refusal naming %q", res, err, want)
			}
		}
		b = newBackend(t, func(c *config.Config) { c.Docker.MemoryLimit, c.Docker.CPUQuota, c.Docker.PidsLimit = 0, 0, 0 })
		sess = open(t, b, "rootless-nolimits")
	} else if err != nil {
		t.Fatalf("Exec(true) = %v", err)
	}
	// Hardened all the same: not root, no capabilities, a read-only root, no network.
	r := run(t, sess, `id -u; grep CapEff /proc/self/status; touch /x 2>/dev/null && echo root-writable; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)
	if r.ExitCode != 0 || r.Stdout != "1000\nCapEff:\t0000000000000000\nlo\n" {
		t.Errorf("rootless sandbox = exit %d %q (stderr %q); want uid 1000, no capabilities, read-only root, only lo", r.ExitCode, r.Stdout, r.Stderr)
	}
}
