//go:build unix

package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigSetNegativeValueAndUnsetSaysWhat(t *testing.T) {
	e := newEnv(t)
	// A value that starts with '-' is a value, not a flag.
	code, _, errOut := e.run("", "config", "set", "docker.pids_limit", "-5")
	if code == 0 || strings.Contains(errOut, "unknown shorthand flag") {
		t.Fatalf("config set docker.pids_limit -5: exit %d, %q; want a validation error about the value", code, errOut)
	}
	e.mustRun("config", "set", "docker.cpu_quota", "0.5")
	if code, _, errOut := e.run("", "config", "unset", "docker.cpu_quota"); code != 0 || !strings.Contains(errOut, "removed docker.cpu_quota") {
		t.Fatalf("config unset: exit %d, stderr %q; want it to say what it removed", code, errOut)
	}
	if code, _, errOut := e.run("", "config", "unset", "docker.cpu_quota"); code != 0 || !strings.Contains(errOut, "not set") {
		t.Fatalf("second config unset: exit %d, stderr %q; want it to say nothing changed", code, errOut)
	}
}

func TestHermesSpellings(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "terminal_backend", "local")
	e.mustRun("config", "set", "terminal_docker_image", "hermes/python:3")
	if out := e.mustRun("config", "get", "docker.image"); out != "hermes/python:3\n" {
		t.Fatalf("docker.image = %q after setting terminal_docker_image", out)
	}
	out := e.mustRun("config", "list", "--aliases")
	for _, want := range []string{"terminal_backend", "terminal_singularity_image", "singularity_readonly"} {
		if !strings.Contains(out, want) {
			t.Errorf("config list --aliases lacks %s:\n%s", want, out)
		}
	}
	// --terminal is --sandbox.
	if code, _, errOut := e.run("", "--terminal", "nosuch", "exec", "--", "true"); code != 2 || !strings.Contains(errOut, `unknown backend "nosuch"`) {
		t.Fatalf("--terminal nosuch: exit %d, %q", code, errOut)
	}
	if out := e.mustRun("--terminal", "local", "exec", "--", "echo", "via-terminal"); out != "via-terminal\n" {
		t.Fatalf("--terminal local exec printed %q", out)
	}
}

func TestImportHermes(t *testing.T) {
	e := newEnv(t)
	hermes := filepath.Join(e.dir, ".hermes")
	if err := os.MkdirAll(hermes, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "terminal:\n  backend: docker\n  timeout: 60\n  docker:\n    memory_limit: 1g\n    network_enabled: false\n  lifetime_seconds: 300\nmodel:\n  default: x\nmodal_token_id: ak-1\n"
	if err := os.WriteFile(filepath.Join(hermes, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Without a terminal and without --yes it only shows the plan, and exits 1 so that a
	// script (yes | hermes-sandbox config import-hermes) notices nothing was written.
	code, out, _ := e.run("", "config", "import-hermes")
	if code != 1 {
		t.Errorf("import-hermes without --yes and a terminal exited %d; want 1", code)
	}
	if code, _, _ := e.run("y\n", "config", "import-hermes"); code != 1 {
		t.Errorf("import-hermes fed y by a pipe exited %d; want 1 (a pipe is no confirmation)", code)
	}
	for _, want := range []string{"terminal.backend", "docker.memory_limit", "terminal.lifetime_seconds", "model.default", "Nothing written", "***"} {
		if !strings.Contains(out, want) {
			t.Errorf("import-hermes output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ak-1") {
		t.Errorf("import-hermes printed a secret:\n%s", out)
	}
	if got := e.mustRun("config", "get", "docker.memory_limit"); got != "512m\n" {
		t.Fatalf("the plan was written without --yes: memory_limit = %q", got)
	}
	e.mustRun("config", "import-hermes", "--yes")
	for key, want := range map[string]string{"terminal.backend": "docker", "terminal.timeout": "1m", "docker.memory_limit": "1g", "modal.token_id": "***"} {
		if got := strings.TrimSpace(e.mustRun("config", "get", key)); got != want {
			t.Errorf("%s = %q after import; want %q", key, got, want)
		}
	}
	if out := e.mustRun("config", "import-hermes"); !strings.Contains(out, "Nothing to change") {
		t.Errorf("a second import found changes:\n%s", out)
	}
}

func TestExecRejectsNonPositiveTimeoutAndShowsUserLines(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	for _, v := range []string{"0", "-1s"} {
		code, _, errOut := e.run("", "exec", "--timeout", v, "--", "true")
		if code != 2 || !strings.Contains(errOut, "positive duration") {
			t.Errorf("exec --timeout %s: exit %d, %q; want a usage error", v, code, errOut)
		}
	}
	code, _, errOut := e.run("", "exec", "-c", "true\nnosuchprog-xyz")
	if code != 127 || !strings.Contains(errOut, "line 2") {
		t.Errorf("exec -c 'true; nosuchprog' (two lines): exit %d, stderr %q; want 127 and the user's line 2", code, errOut)
	}
	_, out, _ := e.run("", "exec", "--help")
	if strings.Contains(out, "--background hermes-sandbox") {
		t.Errorf("exec --help shows --background as taking an argument:\n%s", out)
	}
}

func TestShellCompletion(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	complete := func(args ...string) string {
		t.Helper()
		return e.mustRun(append([]string{"__complete"}, args...)...)
	}
	if out := complete("config", "set", "docker.mem"); !strings.Contains(out, "docker.memory_limit") {
		t.Errorf("config key completion:\n%s", out)
	}
	if out := complete("config", "set", "terminal_docker"); !strings.Contains(out, "terminal_docker_image") {
		t.Errorf("alias completion:\n%s", out)
	}
	if out := complete("config", "set", "sandbox", ""); !strings.Contains(out, "docker") || !strings.Contains(out, "local") {
		t.Errorf("backend value completion:\n%s", out)
	}
	if out := complete("--sandbox", ""); !strings.Contains(out, "singularity") {
		t.Errorf("--sandbox completion:\n%s", out)
	}
	e.mustRun("exec", "--session", "compl-one", "--", "true")
	if out := complete("sessions", "rm", ""); !strings.Contains(out, "compl-one") {
		t.Errorf("session completion:\n%s", out)
	}
	id := strings.TrimSpace(e.mustRun("exec", "--session", "compl-one", "--background", "-c", "sleep 30"))
	if out := complete("jobs", "poll", "--session", "compl-one", ""); !strings.Contains(out, id) {
		t.Errorf("job id completion lacks %q:\n%s", id, out)
	}
	e.mustRun("jobs", "kill", "--session", "compl-one", id)
	e.mustRun("sessions", "rm", "compl-one")
	if out := complete("jobs", "poll", "--session", "never-made", ""); strings.Contains(out, "job-") {
		t.Errorf("completion listed jobs of a session that does not exist:\n%s", out)
	}
	if out := e.mustRun("sessions", "list"); strings.Contains(out, "never-made") {
		t.Errorf("completion created a session:\n%s", out)
	}
}

func TestExecEphemeral(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	if out := e.mustRun("exec", "--ephemeral", "-c", "export EPH=1; echo run-$EPH"); out != "run-1\n" {
		t.Fatalf("ephemeral exec printed %q", out)
	}
	if out := e.mustRun("sessions", "list"); strings.Contains(out, "ephemeral-") {
		t.Fatalf("the ephemeral session was left behind:\n%s", out)
	}
	for _, args := range [][]string{{"--background"}, {"--session", "x"}} {
		code, _, errOut := e.run("", append(append([]string{"exec", "--ephemeral"}, args...), "--", "true")...)
		if code != 2 {
			t.Errorf("exec --ephemeral %v: exit %d, %q; want a usage error", args, code, errOut)
		}
	}
	// terminal.persistence: ephemeral makes every exec a fresh one; Hermes spells it
	// container_persistent: false.
	e.mustRun("config", "set", "terminal_container_persistent", "false")
	if out := e.mustRun("config", "get", "terminal.persistence"); out != "ephemeral\n" {
		t.Fatalf("terminal.persistence = %q", out)
	}
	e.mustRun("exec", "-c", "export KEEP=1")
	if out := e.mustRun("exec", "-c", `echo "${KEEP-unset}"`); out != "unset\n" {
		t.Errorf("state survived between ephemeral runs: %q", out)
	}
	if out := e.mustRun("sessions", "list"); strings.Contains(out, "ephemeral-") {
		t.Errorf("ephemeral sessions were left behind:\n%s", out)
	}
}

// A setup whose final test fails leaves the previous configuration as it was.
func TestSetupRestoresConfigWhenTestFails(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	before := e.mustRun("config", "list")
	code, out, errOut := e.run("", "setup", "ssh", "--non-interactive", "--set", "ssh.host=127.0.0.1", "--set", "ssh.port=1",
		"--set", "ssh.connect_timeout=2s")
	if code == 0 {
		t.Fatalf("setup against a closed port succeeded: %s", errOut)
	}
	if !strings.Contains(errOut, "nothing written") {
		t.Errorf("setup did not say it wrote nothing: %s", errOut)
	}
	if strings.Contains(out, "Wrote") {
		t.Errorf("a setup whose test failed said it wrote the settings:\n%s", out)
	}
	if after := e.mustRun("config", "list"); after != before {
		t.Errorf("the configuration changed after a failed setup:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// Hermes's .env steers this tool (TERMINAL_ENV…), so writing it is out of the agent's reach
// like our own config.
func TestHermesDotenvIsProtected(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	if err := os.MkdirAll(filepath.Join(e.dir, ".hermes"), 0o700); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := e.run("", "policy", "check", "echo TERMINAL_ENV=local >> "+filepath.Join(e.dir, ".hermes", ".env"))
	if code == 0 || !strings.Contains(out+errOut, "hardline") {
		t.Errorf("writing ~/.hermes/.env: exit %d, %s%s; want hardline", code, out, errOut)
	}
}

// TestSettingFromHermesDotenvIsNamed: a value from ~/.hermes/.env that wins over config set is
// said at once by config set, and named again by an error of the backend that uses it.
func TestSettingFromHermesDotenvIsNamed(t *testing.T) {
	e := newEnv(t)
	hermes := filepath.Join(e.dir, ".hermes")
	if err := os.MkdirAll(hermes, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hermes, ".env"), []byte("TERMINAL_SSH_HOST=127.0.0.2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := e.run("", "config", "set", "ssh.host", "127.0.0.1")
	if code != 0 || !strings.Contains(errOut, "TERMINAL_SSH_HOST in "+filepath.Join(hermes, ".env")) || !strings.Contains(errOut, "127.0.0.2") {
		t.Errorf("config set under a .env value: exit %d, %q; want a note naming TERMINAL_SSH_HOST in .hermes/.env and 127.0.0.2", code, errOut)
	}
	e.mustRun("config", "set", "ssh.port", "1") // nothing listens there: the connection is refused
	e.mustRun("config", "set", "ssh.user", "nobody")
	code, _, errOut = e.run("", "--sandbox", "ssh", "exec", "-c", "true")
	if code == 0 || !strings.Contains(errOut, "ssh.host=127.0.0.2 from TERMINAL_SSH_HOST in") {
		t.Errorf("exec with the .env host: exit %d, %q; want the error to name where ssh.host came from", code, errOut)
	}
	if strings.Contains(errOut, "ssh.port=") {
		t.Errorf("a setting from the config file was listed as from the environment: %q", errOut)
	}
}
