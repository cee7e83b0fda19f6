//go:build unix

package cli_test

import (
	"strings"
	"testing"
)

// TestExecRecreateRefusals: `exec --recreate` on a backend whose sessions never keep an
// older sandbox, or with --ephemeral, is a clear error and runs nothing.
func TestExecRecreateRefusals(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	code, out, errOut := e.run("", "exec", "--recreate", "-c", "echo ran")
	if code == 0 || strings.Contains(out, "ran") || !strings.Contains(errOut, "recreate") || !strings.Contains(errOut, "local") {
		t.Errorf("exec --recreate on local = %d, %q, %q; want a refusal naming local and recreate, nothing run", code, out, errOut)
	}
	code, out, errOut = e.run("", "exec", "--recreate", "--ephemeral", "-c", "echo ran")
	if code == 0 || strings.Contains(out, "ran") || !strings.Contains(errOut, "--recreate") {
		t.Errorf("exec --recreate --ephemeral = %d, %q, %q; want a usage error", code, out, errOut)
	}
}
