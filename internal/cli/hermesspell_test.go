//go:build unix

package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Hermes Agent's spellings typed at this CLI get the equivalent or a one-line pointer.
func TestHermesSpellingsAtTheCLI(t *testing.T) {
	e := newEnv(t)
	_, _, errOut := e.run("", "config", "set", "terminal.docker_image", "hermes-sandbox/python:3")
	if !strings.Contains(errOut, "spelling of docker.image") {
		t.Errorf("config set terminal.docker_image did not say what it set: %s", errOut)
	}
	if got := e.mustRun("config", "get", "docker.image"); got != "hermes-sandbox/python:3\n" {
		t.Errorf("docker.image after config set terminal.docker_image = %q", got)
	}
	e.mustRun("config", "set", "terminal.backend", "vercel_sandbox")
	if got := e.mustRun("config", "get", "terminal.backend"); got != "vercel\n" {
		t.Errorf("terminal.backend after vercel_sandbox = %q", got)
	}
	_, _, errOut = e.run("", "config", "set", "approvals.mode", "smart")
	if !strings.Contains(errOut, "smart is stored as manual") {
		t.Errorf("approvals.mode smart: no word on the mapping: %s", errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"config", "set", "approvals.mode", "yolo"}, "approvals.mode off"},
		{[]string{"config", "set", "approvals.mode", "always"}, "approvals.mode off"},
		{[]string{"--yolo", "exec", "--", "true"}, "APPROVALS_MODE=off"},
		{[]string{"exec", "--yolo", "--", "true"}, "APPROVALS_MODE=off"},
		{[]string{"approvals"}, "approvals.mode"},
		{[]string{"chat"}, "MCP section"},
		{[]string{"chat", "--model", "x"}, "hermes-sandbox mcp"},
		{[]string{"--sandbox", "dockr", "exec", "--", "true"}, "did you mean docker?"},
		{[]string{"--config", filepath.Join(e.dir, "nonexistent.yaml"), "config", "list"}, "no such file"},
	} {
		code, out, errOut := e.run("", tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("hermes-sandbox %q: exit %d, %q %q; want a failure naming %q", tc.args, code, out, errOut, tc.want)
		}
	}
	// A pasted Hermes terminal: block gets a pointer at load.
	cfgDir := filepath.Join(e.dir, "config", "hermes-sandbox")
	if err := os.WriteFile(filepath.Join(cfgDir, "config.yaml"), []byte("terminal:\n  backend: docker\n  docker_image: x:1\n  container_persistent: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := e.run("", "config", "list")
	if code == 0 || !strings.Contains(errOut, "Hermes Agent's spelling of docker.image") || !strings.Contains(errOut, "terminal.persistence") {
		t.Errorf("a pasted Hermes terminal block: exit %d, %s", code, errOut)
	}
	// An explicit --config that exists is used; config set creates one that does not.
	p := filepath.Join(e.dir, "other.yaml")
	e.mustRun("--config", p, "config", "set", "sandbox", "local")
	if got := e.mustRun("--config", p, "config", "get", "sandbox"); got != "local\n" {
		t.Errorf("--config %s config get sandbox = %q", p, got)
	}
}
