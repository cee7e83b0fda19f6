//go:build unix

package docker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/backends/docker"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/cli"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestCLIBranching drives snapshot, snapshots, fork, restore and snapshot rm through cli.Run
// on docker: the id is the last line, the copies have the files and state, a restore onto a
// taken name fails, and each call is in the audit log.
func TestCLIBranching(t *testing.T) {
	img := docker.TestImageForCLI(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	// Whatever the CLI made goes with the test: a backend on the same state directory has the
	// same scope, which cleanScope removes.
	docker.CleanStateForCLI(t, state, img)
	environ := append(docker.TestEnvironForCLI(), "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"HERMES_SANDBOX_TERMINAL_STATE_DIR="+state, "HERMES_SANDBOX_TERMINAL_KEEP_ALIVE=0",
		"HERMES_SANDBOX_DOCKER_IMAGE="+img, "HERMES_SANDBOX_AUDIT_LOG_DESTINATION="+filepath.Join(dir, "audit.log"),
		agentbin.EnvVar+"="+os.Getenv(agentbin.EnvVar))
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := cli.RunWith(context.Background(), append([]string{"--sandbox", "docker"}, args...), strings.NewReader(""), &out, &errb, environ)
		return code, out.String(), errb.String()
	}
	must := func(args ...string) string {
		t.Helper()
		code, out, errOut := run(args...)
		if code != 0 {
			t.Fatalf("%q = exit %d, %q, %q", args, code, out, errOut)
		}
		return out
	}
	must("exec", "--session", "main", "-c", "mkdir -p /workspace/d && cd /workspace/d && echo one > f && export HX=1")
	out := must("sessions", "snapshot", "main")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	id := lines[len(lines)-1]
	if !docker.SnapshotIDForCLI.MatchString(id) {
		t.Fatalf("sessions snapshot main printed %q; want the id alone on the last line", out)
	}
	var ref sandbox.SnapshotRef
	if err := json.Unmarshal([]byte(must("sessions", "snapshot", "main", "--json")), &ref); err != nil || ref.Session != "main" || ref.ID == id {
		t.Errorf("sessions snapshot --json = %+v, %v; want a second snapshot of main", ref, err)
	}
	if out := must("sessions", "snapshots"); !strings.Contains(out, id) || !strings.Contains(out, "main") || !strings.Contains(out, "SIZE") {
		t.Errorf("sessions snapshots = %q; want %s of main with a size column", out, id)
	}
	must("exec", "--session", "main", "-c", "echo two > f")
	must("sessions", "fork", "main", "try")
	if out := must("exec", "--session", "try", "-c", `pwd; cat f; echo "$HX"`); out != "/workspace/d\ntwo\n1\n" {
		t.Errorf("the fork: %q; want /workspace/d, two, 1", out)
	}
	must("sessions", "restore", id, "--as", "back")
	if out := must("exec", "--session", "back", "-c", `pwd; cat f; echo "$HX"`); out != "/workspace/d\none\n1\n" {
		t.Errorf("the restored session: %q; want /workspace/d, one, 1", out)
	}
	if code, _, errOut := run("sessions", "restore", id, "--as", "back"); code == 0 || !strings.Contains(errOut, "exists") {
		t.Errorf("restore onto an existing session = %d, %q; want a failure saying it exists", code, errOut)
	}
	if out := must("sessions", "snapshot", "rm", id, ref.ID); !strings.Contains(out, "removed snapshot "+id) {
		t.Errorf("sessions snapshot rm = %q", out)
	}
	if out := must("sessions", "snapshots"); strings.Contains(out, id) {
		t.Errorf("sessions snapshots after rm = %q; still lists %s", out, id)
	}
	recs, err := audit.ReadAll(filepath.Join(dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Type == audit.TypeResult && strings.HasPrefix(r.Tool, "session_") {
			seen[r.Tool+" "+r.Session+" "+r.NewSession] = true
		}
	}
	for _, want := range []string{"session_snapshot main ", "session_fork main try", "session_restore main back", "session_snapshot_rm main "} {
		if !seen[want] {
			t.Errorf("audit log lacks a result %q; has %v", want, seen)
		}
	}
	must("sessions", "rm", "main", "try", "back")
}
