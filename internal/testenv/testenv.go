// Package testenv helps tests find what they need (the helper binary, a Docker engine, an
// SSH server) and decides whether a missing piece skips the test or fails it:
// HERMES_SANDBOX_TEST_REQUIRE=docker,ssh turns those skips into failures, so CI cannot pass
// silently without them.
package testenv

import (
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
