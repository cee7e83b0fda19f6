//go:build unix

package cli_test

import (
	"strings"
	"testing"
)

// TestPolicyCheckKnowsTheHost: policy check judges as exec does for the selected backend:
// from local, which runs on the host, entering a container asks; from docker it does not.
func TestPolicyCheckKnowsTheHost(t *testing.T) {
	e := newEnv(t)
	const line = "docker exec web ls /app"
	e.mustRun("config", "set", "sandbox", "local")
	if code, out, _ := e.run("", "policy", "check", line); code != 1 || !strings.Contains(out, "host-container-exec") {
		t.Errorf("policy check %q on local = %d, %q; want dangerous [host-container-exec]", line, code, out)
	}
	e.mustRun("config", "set", "sandbox", "docker")
	if code, out, _ := e.run("", "policy", "check", line); code != 0 {
		t.Errorf("policy check %q on docker = %d, %q; want safe", line, code, out)
	}
}
