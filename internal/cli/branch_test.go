//go:build unix

package cli_test

import (
	"strings"
	"testing"
)

// TestBranchingUnsupported: the branching subcommands on a backend that cannot branch fail
// with an error that names the backend and why, and make nothing.
func TestBranchingUnsupported(t *testing.T) {
	e := newEnv(t)
	// ssh does not branch (local does, since it copies the session's tree); nothing connects
	// before the gate says so.
	e.mustRun("config", "set", "sandbox", "ssh")
	e.mustRun("config", "set", "ssh.host", "127.0.0.1")
	for _, args := range [][]string{
		{"sessions", "fork", "default", "copy"},
		{"sessions", "snapshot", "default"},
		{"sessions", "snapshots"},
		{"sessions", "restore", "abc", "--as", "copy"},
		{"sessions", "snapshot", "rm", "abc"},
	} {
		code, out, errOut := e.run("", args...)
		if code == 0 || out != "" || !strings.Contains(errOut, "ssh backend cannot snapshot, restore or fork") {
			t.Errorf("%q on ssh = %d, %q, %q; want a failure naming the backend and what it cannot do", args, code, out, errOut)
		}
	}
	if code, _, errOut := e.run("", "sessions", "restore", "abc"); code == 0 || !strings.Contains(errOut, "--as") {
		t.Errorf("sessions restore without --as = %d, %q; want a usage error naming --as", code, errOut)
	}
}
