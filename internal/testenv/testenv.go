// Package testenv helps tests find what they need (the helper binary, a Docker engine, an
// SSH server) and decides whether a missing piece skips the test or fails it:
// HERMES_SANDBOX_TEST_REQUIRE=docker,ssh turns those skips into failures, so CI cannot pass
// silently without them.
package testenv

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
)

// Missing skips the test, or fails it when HERMES_SANDBOX_TEST_REQUIRE names what.
func Missing(t testing.TB, what, reason string) {
	t.Helper()
	if Required(what) {
		t.Fatalf("%s is required (HERMES_SANDBOX_TEST_REQUIRE) but unavailable: %s", what, reason)
	}
	t.Skipf("skipping: %s unavailable: %s (set HERMES_SANDBOX_TEST_REQUIRE=%s to make this a failure)", what, reason, what)
}

// Required reports whether HERMES_SANDBOX_TEST_REQUIRE lists what.
func Required(what string) bool {
	return slices.Contains(strings.Split(os.Getenv("HERMES_SANDBOX_TEST_REQUIRE"), ","), what)
}

var agentOnce struct {
	sync.Once
	path string
	err  error
}

// AgentBinary builds the static sandbox-agent helper for the host architecture once per test
// process and points HERMES_SANDBOX_AGENT at it, so backends find it.
func AgentBinary(t testing.TB) string {
	t.Helper()
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hermes-agent-bin-")
		if err != nil {
			agentOnce.err = err
			return
		}
		out := filepath.Join(dir, "sandbox-agent-linux-"+runtime.GOARCH)
		root := moduleRoot()
		cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/sandbox-agent")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if b, err := cmd.CombinedOutput(); err != nil {
			agentOnce.err = &buildError{string(b), err}
			return
		}
		agentOnce.path = out
	})
	if agentOnce.err != nil {
		t.Fatalf("build sandbox-agent: %v", agentOnce.err)
	}
	t.Setenv(agentbin.EnvVar, agentOnce.path)
	return agentOnce.path
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// moduleRoot finds the directory holding go.mod above this source file's package.
func moduleRoot() string {
	dir, _ := os.Getwd()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return dir
}

// BusyboxRootfs builds a minimal root filesystem from the host's static busybox in a
// temporary directory: /bin applets, /usr/bin/env, passwd and group with
// sandbox(1000), /tmp 0755 (as in a bare root filesystem) and no /workspace. A hash of
// its content and layout, the second result, makes an image tag that is built once and then
// found again. Without a static busybox the test is skipped (or fails when docker is required).
func BusyboxRootfs(t testing.TB) (string, string) {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		bb = "/bin/busybox"
	}
	if err := checkStatic(bb); err != nil {
		Missing(t, "docker", "the test image needs a static busybox: apt-get install busybox-static ("+err.Error()+")")
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	applets := strings.Fields(string(out))
	const layout = "busybox-rootfs-v2: /bin applets, passwd with sandbox(1000), /tmp 0755, no /workspace"
	h := sha256.Sum256(append(data, layout...))
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin", "etc", "tmp", "proc", "sys", "dev", "root", "usr/bin", "home/sandbox"} {
		must(os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	// /tmp 0755, as in a bare root filesystem: the sandbox must still work.
	must(os.Chmod(filepath.Join(dir, "tmp"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "bin", "busybox"), data, 0o755))
	for _, a := range applets {
		if a == "busybox" {
			continue
		}
		must(os.Symlink("busybox", filepath.Join(dir, "bin", a)))
	}
	must(os.Symlink("/bin/env", filepath.Join(dir, "usr", "bin", "env")))
	must(os.WriteFile(filepath.Join(dir, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "etc", "group"), []byte("root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"), 0o644))
	return dir, hex.EncodeToString(h[:])[:12]
}

func checkStatic(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", p)
		}
	}
	return nil
}
