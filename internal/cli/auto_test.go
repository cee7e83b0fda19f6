//go:build unix

package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// TestAutoNeverPicksLocal: with nothing configured and no usable docker, neither exec nor
// the MCP server runs anything on the host: they refuse with the commands that fix it. The
// local backend runs when chosen, by the config, the environment or --sandbox.
func TestAutoNeverPicksLocal(t *testing.T) {
	e := newEnv(t)
	// An engine address where none answers: docker is not usable.
	e.environ = append(e.environ, "DOCKER_HOST=unix://"+filepath.Join(e.dir, "no-engine.sock"))

	code, out, errOut := e.run("", "exec", "-c", "echo ran-on-the-host")
	if code == 0 || out != "" {
		t.Fatalf("exec with auto and no docker: exit %d, stdout %q, stderr %q; want a refusal, nothing run", code, out, errOut)
	}
	for _, want := range []string{"docker is not usable", "UNISOLATED", "hermes-sandbox config set sandbox local", "hermes-sandbox setup", "hermes-sandbox doctor"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, errOut)
		}
	}

	// The MCP server (the README's Claude Code recipe has no --sandbox) refuses to start.
	code, out, errOut = e.run("", "mcp")
	if code == 0 || !strings.Contains(errOut, "hermes-sandbox config set sandbox local") || strings.Contains(out, "jsonrpc") {
		t.Errorf("mcp with auto and no docker: exit %d, stdout %q, stderr %q; want a refusal before serving", code, out, errOut)
	}

	// doctor: auto stands or falls with docker.
	code, out, _ = e.run("", "doctor")
	if code != 1 || !strings.Contains(out, "commands are refused") {
		t.Errorf("doctor with auto and no docker: exit %d; want 1 and what auto does:\n%s", code, out)
	}

	// Chosen explicitly, local runs: for one call, from the environment, from the config.
	if out := e.mustRun("--sandbox", "local", "exec", "-c", "echo flag"); out != "flag\n" {
		t.Errorf("--sandbox local exec printed %q", out)
	}
	byEnv := &env{t: t, dir: e.dir, environ: append(append([]string{}, e.environ...), "HERMES_SANDBOX_TERMINAL_BACKEND=local")}
	if out := byEnv.mustRun("exec", "-c", "echo env"); out != "env\n" {
		t.Errorf("HERMES_SANDBOX_TERMINAL_BACKEND=local exec printed %q", out)
	}
	e.mustRun("config", "set", "sandbox", "local")
	if out := e.mustRun("exec", "-c", "echo config"); out != "config\n" {
		t.Errorf("exec with sandbox local in the config printed %q", out)
	}
}

// TestFirstExecRunsInDockerWithNoConfig: after `make run` built its image, the README's first
// exec, with nothing configured, runs in a docker container and says which image.
func TestFirstExecRunsInDockerWithNoConfig(t *testing.T) {
	cli := testenv.DockerEngine(t, "the first exec in docker: ")
	ctx := t.Context()
	if _, err := cli.ImageInspect(ctx, config.BuiltDockerImage); err != nil {
		t.Skipf("needs the image `make run` builds (%s): %v", config.BuiltDockerImage, err)
	}
	if def := config.NewConfig().Docker.Image; imagePresent(t, def) {
		t.Skipf("needs an engine without the default image %s (the built image stands in only for a missing one)", def)
	}
	testenv.AgentBinary(t)
	e := newEnv(t)
	t.Cleanup(func() { e.run("", "sessions", "rm", "first") })
	code, out, errOut := e.run("", "exec", "--session", "first", "-c", "test -f /.dockerenv && echo in-a-container")
	if code != 0 || out != "in-a-container\n" {
		t.Fatalf("exec with no configuration: exit %d, stdout %q, stderr %q; want it run in a container", code, out, errOut)
	}
	if !strings.Contains(errOut, "using docker") || !strings.Contains(errOut, config.BuiltDockerImage) {
		t.Errorf("exec with no configuration said %q; want it to name docker and the image %s", errOut, config.BuiltDockerImage)
	}
}

func imagePresent(t *testing.T, ref string) bool {
	_, err := testenv.Docker(t).ImageInspect(t.Context(), ref)
	return err == nil
}
