package testenv

import (
	"fmt"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// LogOnFailure logs, if the test fails, the command that ran on backend and what it printed,
// so a failure shows the sandbox's own stderr next to the assertion that failed.
func LogOnFailure(t testing.TB, backend, command string, res *sandbox.Result) {
	if res == nil {
		return
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s ran %q: exit %d\n  stdout: %s\n  stderr: %s", backend, command, res.ExitCode, clip(res.Stdout), clip(res.Stderr))
		}
	})
}

// clip bounds a stream for a test log.
func clip(s string) string {
	const max = 2000
	if len(s) > max {
		return fmt.Sprintf("%q… (%d bytes)", s[:max], len(s))
	}
	return fmt.Sprintf("%q", s)
}
