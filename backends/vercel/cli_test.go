//go:build unix

package vercel_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/backends/vercel"
	"github.com/hermes-sandbox/hermes-sandbox/internal/cli"
)

// TestCLIAgainstFake drives `hermes-sandbox --sandbox vercel …` against the fake API: exec
// with state across runs, doctor, sessions list/snapshot/rm.
func TestCLIAgainstFake(t *testing.T) {
	url, token, team, project := vercel.FakeAPI(t)
	dir := t.TempDir()
	environ := []string{"HOME=" + dir, "PATH=/usr/bin:/bin",
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state"),
		"VERCEL_TOKEN=" + token, "HERMES_SANDBOX_VERCEL_API_URL=" + url,
		"HERMES_SANDBOX_VERCEL_TEAM_ID=" + team, "HERMES_SANDBOX_VERCEL_PROJECT_ID=" + project}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out, errb bytes.Buffer
		code := cli.RunWith(ctx, append([]string{"--sandbox", "vercel"}, args...), strings.NewReader(""), &out, &errb, environ)
		return code, out.String(), errb.String()
	}
	// setup writes the settings (the token to secrets.yaml) and proves the backend works.
	code, out, errOut := run("setup", "vercel", "--non-interactive", "--set", "vercel.token="+token,
		"--set", "vercel.team_id="+team, "--set", "vercel.project_id="+project, "--set", "vercel.api_url="+url)
	if code != 0 || !strings.Contains(out, "OK: vercel works") {
		t.Fatalf("setup vercel = %d %q %q; want the test command's output", code, out, errOut)
	}
	environ = environ[:4] // from now on the settings come from the files setup wrote
	if code, out, errOut := run("exec", "-c", "cd /tmp && export X=1 && echo hi && echo err >&2; exit 3"); code != 3 || out != "hi\n" || errOut != "err\n" {
		t.Fatalf("first exec = %d %q %q; want 3, hi, err", code, out, errOut)
	}
	if code, out, errOut := run("exec", "-c", "pwd; echo $X"); code != 0 || out != "/tmp\n1\n" {
		t.Errorf("second exec = %d %q %q; want /tmp and 1", code, out, errOut)
	}
	if code, out, _ := run("doctor"); !strings.Contains(out, "vercel") || !strings.Contains(out, "Firecracker") {
		t.Errorf("doctor = %d %q; want vercel usable", code, out)
	}
	if code, out, errOut := run("sessions", "list"); code != 0 || !strings.Contains(out, "default") {
		t.Errorf("sessions list = %d %q %q; want the default session", code, out, errOut)
	}
	if code, out, errOut := run("sessions", "snapshot", "default"); code != 0 || !strings.Contains(out, "snapshot of default: snap_") {
		t.Errorf("sessions snapshot = %d %q %q", code, out, errOut)
	}
	// The snapshot stopped the sandbox; the next exec resumes it with its files and state.
	if code, out, errOut := run("exec", "--json", "-c", "pwd"); code != 0 || !strings.Contains(out, `"stdout":"/tmp\n"`) || !strings.Contains(out, `"environment_recreated":false`) {
		t.Errorf("exec after snapshot = %d %q %q; want /tmp, not recreated", code, out, errOut)
	}
	// gc keeps a running sandbox (and names it).
	if code, out, errOut := run("gc", "--idle", "1ns"); code != 0 || !strings.Contains(out, "kept sandbox default") {
		t.Errorf("gc = %d %q %q; want the running default session kept", code, out, errOut)
	}
	// A timeout kills the command (exit 124) and the sandbox lives on with its state.
	if code, _, errOut := run("exec", "--timeout", "2s", "-c", "sleep 60"); code != 124 {
		t.Errorf("exec past its timeout = %d %q; want 124", code, errOut)
	}
	if code, out, errOut := run("exec", "-c", "pwd"); code != 0 || out != "/tmp\n" {
		t.Errorf("exec after a timeout = %d %q %q; want /tmp, the session kept", code, out, errOut)
	}
	// A second session is a sandbox of its own.
	if code, out, errOut := run("exec", "--session", "second", "-c", "pwd; echo ${X:-unset}"); code != 0 || out != "/vercel/sandbox\nunset\n" {
		t.Errorf("exec in a second session = %d %q %q; want its own directory and environment", code, out, errOut)
	}
	if code, out, errOut := run("sessions", "list"); code != 0 || !strings.Contains(out, "default") || !strings.Contains(out, "second") {
		t.Errorf("sessions list = %d %q %q; want both sessions", code, out, errOut)
	}
	if code, out, errOut := run("sessions", "rm", "second"); code != 0 || out != "removed second\n" {
		t.Errorf("sessions rm second = %d %q %q", code, out, errOut)
	}
	if code, out, errOut := run("sessions", "rm", "default"); code != 0 || out != "removed default\n" {
		t.Errorf("sessions rm = %d %q %q", code, out, errOut)
	}
	if code, _, errOut := run("sessions", "rm", "default"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("sessions rm of a removed session = %d %q; want a not-found error", code, errOut)
	}
	// rm --all removes every session, and then there are none.
	for _, name := range []string{"a", "b"} {
		if code, _, errOut := run("exec", "--session", name, "-c", "true"); code != 0 {
			t.Fatalf("exec in session %s = %d %q", name, code, errOut)
		}
	}
	if code, out, errOut := run("sessions", "rm", "--all"); code != 0 || !strings.Contains(out, "removed a") || !strings.Contains(out, "removed b") {
		t.Errorf("sessions rm --all = %d %q %q; want both removed", code, out, errOut)
	}
	if code, out, errOut := run("sessions", "list"); code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.HasPrefix(out, "NAME") {
		t.Errorf("sessions list after rm --all = %d %q %q; want the header alone", code, out, errOut)
	}
}
