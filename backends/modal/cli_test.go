//go:build unix

package modal_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/modal"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/cli"
)

// TestCLIAgainstFake: `hermes-sandbox --sandbox modal exec` behaves as with docker (exit
// codes, state across CLI runs), and sessions, snapshot, doctor and rm work, all through the
// real SDK against the fake Modal.
func TestCLIAgainstFake(t *testing.T) {
	url, id, secret, running := modal.FakeForCLI(t)
	dir := t.TempDir()
	environ := []string{"HOME=" + dir, "PATH=/usr/bin:/bin",
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state"),
		"MODAL_SERVER_URL=" + url, "MODAL_TOKEN_ID=" + id, "MODAL_TOKEN_SECRET=" + secret,
		agentbin.EnvVar + "=" + os.Getenv(agentbin.EnvVar)}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := cli.RunWith(context.Background(), append([]string{"--sandbox", "modal"}, args...), strings.NewReader(""), &out, &errb, environ)
		return code, out.String(), errb.String()
	}
	if code, out, errOut := run("exec", "--", "echo", "hi"); code != 0 || out != "hi\n" {
		t.Fatalf("exec -- echo hi = %d %q %q", code, out, errOut)
	}
	if code, _, errOut := run("exec", "-c", "mkdir -p /tmp/w && cd /tmp/w && export HERMES_X=1; exit 3"); code != 3 {
		t.Errorf("exec exit 3 = %d (%s)", code, errOut)
	}
	if code, out, errOut := run("exec", "-c", `pwd; echo "$HERMES_X"; echo err >&2`); code != 0 || out != "/tmp/w\n1\n" || errOut != "err\n" {
		t.Errorf("state across CLI runs: %d %q %q; want /tmp/w, 1 and stderr err", code, out, errOut)
	}
	if n := running(); n != 1 {
		t.Errorf("%d sandboxes run after three CLI runs; want 1", n)
	}
	if code, out, errOut := run("sessions", "list"); code != 0 || !strings.Contains(out, "default") {
		t.Errorf("sessions list = %d %q %q", code, out, errOut)
	}
	if code, out, errOut := run("sessions", "snapshot", "default"); code != 0 || !strings.Contains(out, "snapshot of default: im-") {
		t.Errorf("sessions snapshot = %d %q %q", code, out, errOut)
	}
	if code, out, _ := run("doctor"); !strings.Contains(out, "credentials from environment (MODAL_TOKEN_ID)") || !strings.Contains(out, "ok   modal") {
		t.Errorf("doctor (exit %d) does not show modal usable with the credentials' source:\n%s", code, out)
	}
	if code, out, errOut := run("sessions", "rm", "default"); code != 0 || out != "removed default\n" {
		t.Errorf("sessions rm = %d %q %q", code, out, errOut)
	}
	if n := running(); n != 0 {
		t.Errorf("%d sandboxes run after sessions rm; want 0", n)
	}
}

// TestSetupFindsModalTOML: `setup modal` finds the token in ~/.modal.toml, proves it with a
// real call and runs a first command.
func TestSetupFindsModalTOML(t *testing.T) {
	url, id, secret, running := modal.FakeForCLI(t)
	dir := t.TempDir()
	toml := "[me]\nactive = true\nserver_url = \"" + url + "\"\ntoken_id = \"" + id + "\"\ntoken_secret = \"" + secret + "\"\n"
	if err := os.WriteFile(filepath.Join(dir, ".modal.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	environ := []string{"HOME=" + dir, "PATH=/usr/bin:/bin",
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state"),
		agentbin.EnvVar + "=" + os.Getenv(agentbin.EnvVar)}
	var out, errb bytes.Buffer
	// Empty answers: keep the profile's token, the default image and no GPU.
	code := cli.RunWith(context.Background(), []string{"setup", "modal"}, strings.NewReader("\n\n\n\n"), &out, &errb, environ)
	if code != 0 || !strings.Contains(out.String(), `Found Modal credentials in `) || !strings.Contains(out.String(), "OK: modal works") {
		t.Fatalf("setup modal = %d\n%s\n%s", code, out.String(), errb.String())
	}
	if n := running(); n != 0 {
		t.Errorf("the setup test session's sandbox still runs (%d)", n)
	}
}
