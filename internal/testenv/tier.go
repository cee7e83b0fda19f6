package testenv

import (
	"os"
	"testing"
)

// FullEnv is the environment variable that turns on the full test tier: the tests that need a
// Docker engine or a test kube-apiserver. Without it, plain `go test ./...` skips them (with
// this reason), so it finishes in minutes and never reaches Go's default per-package timeout
// on a machine that has docker. `make test` sets it; HERMES_SANDBOX_TEST_REQUIRE naming the
// requirement turns the tier on for those tests too, so CI cannot skip them by accident.
const FullEnv = "HERMES_SANDBOX_TEST_FULL"

// Full reports whether the full tier is on for tests that need what: HERMES_SANDBOX_TEST_FULL=1,
// or HERMES_SANDBOX_TEST_REQUIRE lists what.
func Full(what string) bool {
	return os.Getenv(FullEnv) == "1" || Required(what)
}

// NeedFull skips the test unless the full tier is on for what (see Full). A value of
// HERMES_SANDBOX_TEST_FULL other than "" or "1" fails the test, so a typo cannot skip it.
func NeedFull(t testing.TB, what, why string) {
	t.Helper()
	if v := os.Getenv(FullEnv); v != "" && v != "1" {
		t.Fatalf("%s=%q; want 1 or unset", FullEnv, v)
	}
	if !Full(what) {
		t.Skipf("skipping: %s; needs %s, which is in the full tier: set %s=1 (make test does) to run it", why, what, FullEnv)
	}
}
