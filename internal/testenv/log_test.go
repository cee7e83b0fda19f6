package testenv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

type fakeTB struct {
	testing.TB // the methods LogOnFailure does not call
	cleanups   []func()
	failed     bool
	logs       []string
}

func (f *fakeTB) Cleanup(fn func())            { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Failed() bool                 { return f.failed }
func (f *fakeTB) Logf(format string, a ...any) { f.logs = append(f.logs, fmt.Sprintf(format, a...)) }
func (f *fakeTB) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// A failed test's log shows the command, the backend and what it printed; a passing one's
// shows nothing.
func TestLogOnFailure(t *testing.T) {
	res := &sandbox.Result{ExitCode: 2, Stdout: "out", Stderr: "sh: boom"}
	pass := &fakeTB{}
	LogOnFailure(pass, "docker", "ls /x", res)
	pass.end()
	if len(pass.logs) != 0 {
		t.Errorf("a passing test logged %q", pass.logs)
	}
	fail := &fakeTB{failed: true}
	LogOnFailure(fail, "docker (gated)", "ls /x", res)
	fail.end()
	if len(fail.logs) != 1 || !strings.Contains(fail.logs[0], `docker (gated) ran "ls /x": exit 2`) || !strings.Contains(fail.logs[0], `"sh: boom"`) {
		t.Errorf("failed test logged %q; want the backend, command, exit code and stderr", fail.logs)
	}
	long := &fakeTB{failed: true}
	LogOnFailure(long, "local", "yes", &sandbox.Result{Stdout: strings.Repeat("y\n", 5000)})
	long.end()
	if len(long.logs) != 1 || len(long.logs[0]) > 5000 || !strings.Contains(long.logs[0], "(10000 bytes)") {
		t.Errorf("a long stream was not clipped: %d bytes", len(long.logs[0]))
	}
}
