// Package testenv helps tests find what they need (the helper binary, a Docker engine, an
// SSH server) and decides whether a missing piece skips the test or fails it:
// HERMES_SANDBOX_TEST_REQUIRE=docker,ssh turns those skips into failures, so CI cannot pass
// silently without them.
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
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

// AgentBinary builds the static sandbox-agent helper for the host architecture once per test
// process (BuildBinary: removed by RemoveBuilt, or swept once the process is gone) and points
// HERMES_SANDBOX_AGENT at it, so backends find it.
func AgentBinary(t testing.TB) string {
	t.Helper()
	p := BuildBinary(t, "./cmd/sandbox-agent", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	t.Setenv(agentbin.EnvVar, p)
	return p
}

// AgentBinaryForProcess is AgentBinary for a package whose tests all use the one helper and
// some run in parallel (t.Setenv is refused there): it points HERMES_SANDBOX_AGENT at the
// helper for the rest of the test process.
func AgentBinaryForProcess(t testing.TB) string {
	t.Helper()
	p := BuildBinary(t, "./cmd/sandbox-agent", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if err := os.Setenv(agentbin.EnvVar, p); err != nil {
		t.Fatal(err)
	}
	return p
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
