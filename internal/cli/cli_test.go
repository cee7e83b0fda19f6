//go:build unix

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/cli"
)

// env is an isolated user: its own config, state and home.
type env struct {
	t       *testing.T
	dir     string
	environ []string
	// ownersOnce: the cleanup that stops session owners is registered once
	ownersOnce sync.Once
}

func newEnv(t *testing.T) *env {
	dir := t.TempDir()
	e := &env{t: t, dir: dir, environ: []string{
		"HOME=" + dir, "PATH=/usr/local/bin:/usr/bin:/bin",
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state"),
		// Sessions start here, never in the repository the tests run from.
		"HERMES_SANDBOX_TERMINAL_CWD=" + dir,
	}}
	return e
}

// run runs the CLI in-process and returns exit code, stdout and stderr.
func (e *env) run(stdin string, args ...string) (int, string, string) {
	e.t.Helper()
	var out, errb bytes.Buffer
	code := cli.RunWith(context.Background(), args, strings.NewReader(stdin), &out, &errb, e.environ)
	return code, out.String(), errb.String()
}

func (e *env) mustRun(args ...string) string {
	e.t.Helper()
	code, out, errOut := e.run("", args...)
	if code != 0 {
		e.t.Fatalf("hermes-sandbox %q exited %d: %s%s", args, code, out, errOut)
	}
	return out
}

func TestExecStatePersistsAcrossRuns(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("exec", "-c", "cd /tmp && export X=1")
	if out := e.mustRun("exec", "-c", "pwd; echo $X"); out != "/tmp\n1\n" {
		t.Errorf("second exec printed %q; want /tmp and 1", out)
	}
	// Another session does not share it.
	if out := e.mustRun("exec", "--session", "other", "-c", `echo "${X-unset}"`); out != "unset\n" {
		t.Errorf("other session printed %q", out)
	}
}

func TestExecJSONAndExitCodes(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	code, out, _ := e.run("", "exec", "--json", "-c", "echo hi; echo oops >&2; exit 3")
	if code != 3 {
		t.Errorf("exit code = %d; want 3", code)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	for _, k := range []string{"exit_code", "stdout", "stderr", "truncated", "output_file", "duration_ms", "cwd", "environment_recreated", "state_saved"} {
		if _, ok := res[k]; !ok {
			t.Errorf("--json lacks %q: %s", k, out)
		}
	}
	if res["stdout"] != "hi\n" || res["stderr"] != "oops\n" || res["exit_code"] != 3.0 || res["state_saved"] != true {
		t.Errorf("--json = %s", out)
	}
	// A state that cannot be written (the wrapper's state path pointed at a missing
	// directory, as a full disk refuses it): state_saved false and a warning on stderr.
	code, out, errOut := e.run("", "exec", "--json", "-c", "export X=1; __hermes_st=/nonexistent-hermes-dir/state")
	res = nil
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("--json output %q exit %d: %v", out, code, err)
	}
	if res["state_saved"] != false || !strings.Contains(errOut, "warning: this command's cd and export were not saved") {
		t.Errorf("--json with an unwritable state = %s, stderr %q; want state_saved false and a warning", out, errOut)
	}
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"exec", "-c", "true"}, 0},
		{[]string{"exec", "--", "no-such-program-hermes"}, 127},
		{[]string{"exec", "-c", "no-such-program-hermes"}, 127},
		{[]string{"exec", "--timeout", "300ms", "-c", "sleep 30"}, 124},
		{[]string{"exec"}, 2},
		{[]string{"exec", "-c", ""}, 2},
		{[]string{"exec", "-c", "x", "--", "y"}, 2},
		{[]string{"exec", "--env", "NOEQUALS", "-c", "true"}, 2},
		{[]string{"exec", "--cwd", "/no/such/dir", "-c", "pwd"}, 125}, // hermes-sandbox's own failure
		{[]string{"exec", "-c", "rm -rf /"}, 126},
	}
	for _, tt := range tests {
		if code, out, errOut := e.run("", tt.args...); code != tt.code {
			t.Errorf("hermes-sandbox %q exited %d; want %d (%s%s)", tt.args, code, tt.code, out, errOut)
		}
	}
}

func TestExecArgvAndEnv(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	weird := "a'b\"c $(echo no) \xff"
	if out := e.mustRun("exec", "--", "printf", "%s", weird); out != weird {
		t.Errorf("argv came back as %q; want %q", out, weird)
	}
	if out := e.mustRun("exec", "--env", "K=v=w", "-c", `printf %s "$K"`); out != "v=w" {
		t.Errorf("--env value = %q", out)
	}
	// A command that closes stdout early and goes on.
	if code, _, errOut := e.run("", "exec", "-c", "exec 1>&-; echo still >&2"); code != 0 || errOut != "still\n" {
		t.Errorf("closed stdout: exit %d stderr %q", code, errOut)
	}
	// Stdin passes through.
	if code, out, _ := e.run("piped\n", "exec", "-c", "cat"); code != 0 || out != "piped\n" {
		t.Errorf("stdin: exit %d out %q", code, out)
	}
}

func TestHostSecretsStayOut(t *testing.T) {
	e := newEnv(t)
	e.environ = append(e.environ, "OPENAI_API_KEY=sk-secret-value-123456", "MY_TOKEN=tok-123456789", "PLAIN=ok")
	e.mustRun("config", "set", "sandbox", "local")
	out := e.mustRun("exec", "-c", "env")
	if strings.Contains(out, "sk-secret") || strings.Contains(out, "tok-1234") || strings.Contains(out, "PLAIN=") {
		t.Errorf("host environment leaked: %s", out)
	}
	e.mustRun("config", "set", "terminal.env_passthrough", "MY_TOKEN,PLAIN")
	out = e.mustRun("exec", "-c", "env")
	if !strings.Contains(out, "MY_TOKEN=tok-123456789") || !strings.Contains(out, "PLAIN=ok") || strings.Contains(out, "sk-secret") {
		t.Errorf("passthrough: %s", out)
	}
}

func TestUnknownBackendListsAllEight(t *testing.T) {
	e := newEnv(t)
	code, _, errOut := e.run("", "--sandbox", "nope", "exec", "-c", "true")
	if code == 0 {
		t.Fatalf("unknown backend exited 0")
	}
	_, help, _ := e.run("", "--help")
	for _, n := range []string{"local", "docker", "ssh", "singularity", "modal", "daytona", "vercel", "kubernetes"} {
		if !strings.Contains(errOut, n) {
			t.Errorf("error %q does not list %s", errOut, n)
		}
		if first, _, _ := strings.Cut(help, "\n\n"); !strings.Contains(first, n) {
			t.Errorf("--help's description %q does not name %s", first, n)
		}
	}
}

func TestConfigBadInput(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.dir, "config", "hermes-sandbox", "config.yaml")
	os.MkdirAll(filepath.Dir(path), 0o700)
	os.WriteFile(path, []byte("terminal:\n  backend: local\ndocker:\n  netwrk_enabled: true\n"), 0o600)
	code, _, errOut := e.run("", "exec", "-c", "true")
	if code == 0 || !strings.Contains(errOut, "netwrk_enabled") || !strings.Contains(errOut, "network_enabled") || !strings.Contains(errOut, ":4") {
		t.Errorf("unknown key: exit %d, %q; want the key, the suggestion and line 4", code, errOut)
	}
	os.WriteFile(path, []byte("terminal: [unclosed\n"), 0o600)
	if code, _, errOut := e.run("", "exec", "-c", "true"); code == 0 || !strings.Contains(errOut, "config.yaml") {
		t.Errorf("malformed YAML: exit %d, %q", code, errOut)
	}
	os.Remove(path)
	if code, _, errOut := e.run("", "config", "set", "docker.memory_limit", "lots"); code == 0 || errOut == "" {
		t.Errorf("config set of a bad size: exit %d %q", code, errOut)
	}
	if code, _, _ := e.run("", "config", "set", "docker.nope", "1"); code == 0 {
		t.Errorf("config set of an unknown key succeeded")
	}
	e.mustRun("config", "set", "sandbox", "docker")
	if out := e.mustRun("config", "get", "terminal.backend"); out != "docker\n" {
		t.Errorf("config get terminal.backend = %q after `config set sandbox docker`", out)
	}
	e.mustRun("config", "set", "docker.image", "img:1")
	e.mustRun("config", "unset", "docker.image")
	if out := e.mustRun("config", "get", "docker.image"); out != "python:3.12-slim\n" {
		t.Errorf("after unset docker.image = %q", out)
	}
	if out := e.mustRun("config", "path"); strings.TrimSpace(out) != path {
		t.Errorf("config path = %q; want %q", out, path)
	}
	if out := e.mustRun("config", "list"); !strings.Contains(out, "terminal.backend") || !strings.Contains(out, "(file)") {
		t.Errorf("config list = %q", out)
	}
}

func TestSessionsListAndRemove(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("exec", "--session", "alpha", "-c", "true")
	e.mustRun("exec", "--session", "beta", "-c", "true")
	out := e.mustRun("sessions", "list")
	if !strings.Contains(out, "alpha") || !strings.Contains(out, "beta") {
		t.Fatalf("sessions list = %q", out)
	}
	e.mustRun("sessions", "rm", "alpha")
	if out := e.mustRun("sessions", "list"); strings.Contains(out, "alpha") {
		t.Errorf("alpha still listed: %q", out)
	}
	if code, _, _ := e.run("", "sessions", "rm", "alpha"); code == 0 {
		t.Errorf("removing a missing session exited 0")
	}
	e.mustRun("sessions", "rm", "--all")
	if out := e.mustRun("sessions", "list"); strings.Contains(out, "beta") {
		t.Errorf("beta still listed: %q", out)
	}
}

func TestBackgroundJobsFromTheCLI(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	id := strings.TrimSpace(e.mustRun("exec", "--background", "-c", "echo from-job; exit 4"))
	if !strings.HasPrefix(id, "job-") {
		t.Fatalf("exec --background printed %q; want a job id", id)
	}
	code, out, _ := e.run("", "jobs", "wait", id)
	if code != 4 || out != "from-job\n" {
		t.Errorf("jobs wait = %d %q; want 4 from-job", code, out)
	}
	if out := e.mustRun("jobs", "list"); !strings.Contains(out, id) || !strings.Contains(out, "exited 4") {
		t.Errorf("jobs list = %q", out)
	}
}

func TestDoctorListsEveryBackend(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	_, out, _ := e.run("", "doctor")
	for _, n := range []string{"local", "docker", "ssh", "singularity", "modal", "daytona", "vercel"} {
		if !strings.Contains(out, n) {
			t.Errorf("doctor output lacks %s:\n%s", n, out)
		}
	}
}

func TestBenchJSON(t *testing.T) {
	e := newEnv(t)
	out := e.mustRun("bench", "--sandbox", "local", "-n", "5", "--json")
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench --json = %q: %v", out, err)
	}
	for _, k := range []string{"backend", "n", "overhead_p50_ms", "overhead_p95_ms", "overhead_p99_ms", "baseline", "baseline_p50_ms"} {
		if _, ok := r[k]; !ok {
			t.Errorf("bench --json lacks %q: %s", k, out)
		}
	}
	if r["backend"] != "local" || r["n"] != 5.0 || r["overhead_p50_ms"].(float64) <= 0 || r["baseline_p50_ms"].(float64) <= 0 {
		t.Errorf("bench --json = %s", out)
	}
}

func TestSetupNonInteractive(t *testing.T) {
	e := newEnv(t)
	code, out, errOut := e.run("", "setup", "local", "--non-interactive", "--set", "terminal.timeout=45s")
	if code != 0 || !strings.Contains(out, "OK: local works") {
		t.Fatalf("setup = %d %q %q", code, out, errOut)
	}
	if got := e.mustRun("config", "get", "terminal.timeout"); got != "45s\n" {
		t.Errorf("timeout after setup = %q", got)
	}
	if got := e.mustRun("config", "get", "sandbox"); got != "local\n" {
		t.Errorf("backend after setup = %q", got)
	}
	if code, _, _ := e.run("", "setup", "nope", "--non-interactive"); code == 0 {
		t.Errorf("setup of an unknown backend exited 0")
	}
}

func TestPolicyCheckBatch(t *testing.T) {
	e := newEnv(t)
	code, out, _ := e.run("ls -la\nrm -rf /\ngit push --force\n\n", "policy", "check")
	if code != 0 {
		t.Fatalf("batch exit %d", code)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines for 4 inputs: %q", len(lines), out)
	}
	want := []string{"safe", "hardline", "dangerous", "safe"}
	for i, l := range lines {
		var r struct {
			Command  string            `json:"command"`
			Verdict  string            `json:"verdict"`
			Findings []json.RawMessage `json:"findings"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		if r.Verdict != want[i] || r.Findings == nil {
			t.Errorf("line %d = %s; want verdict %s and a findings array", i, l, want[i])
		}
	}
	if code, _, _ := e.run("", "policy", "check", "rm -rf /"); code != 2 {
		t.Errorf("policy check hardline exit = %d; want 2", code)
	}
}

func TestAuditRecordsEveryExecAndVerifies(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("exec", "-c", "echo one")
	e.run("", "exec", "-c", "rm -rf /")
	// The echo's intent and result, and the refused command's intent.
	out := e.mustRun("audit", "verify")
	if !strings.Contains(out, ": ok: 3 records,") {
		t.Errorf("audit verify = %q; want ok with 3 records", out)
	}
	if out := e.mustRun("audit", "show", "--session", "default"); !strings.Contains(out, "echo one") || !strings.Contains(out, "rm -rf /") {
		t.Errorf("audit show = %q", out)
	}
	// Tampering is caught.
	log := filepath.Join(e.dir, ".local", "state", "hermes-sandbox", "audit.log")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(log, bytes.Replace(b, []byte("echo one"), []byte("echo two"), 1), 0o600)
	if code, out, _ := e.run("", "audit", "verify"); code == 0 || !strings.Contains(out, "line 1 (seq 1): hash mismatch") {
		t.Errorf("verify after an edit = %d %q; want failure naming record 1", code, out)
	}
}

func TestSetupInteractiveFromLines(t *testing.T) {
	e := newEnv(t)
	// Without a terminal the wizard reads answers line by line: the backend, then the
	// working directory question for local (empty keeps the default).
	code, out, errOut := e.run("local\n\n", "setup")
	if code != 0 || !strings.Contains(out, "Recommended backend:") || !strings.Contains(out, "OK: local works") {
		t.Fatalf("setup = %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "no isolation") {
		t.Errorf("setup did not warn that local has no isolation:\n%s", out)
	}
	if got := e.mustRun("config", "get", "sandbox"); got != "local\n" {
		t.Errorf("backend after setup = %q", got)
	}
}

func TestExecJSONOnRefusal(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	code, out, _ := e.run("", "exec", "--json", "-c", "rm -rf /")
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json on a refusal printed %q: %v", out, err)
	}
	if code != 126 || res["exit_code"] != 126.0 || !strings.Contains(res["stderr"].(string), "hardline") {
		t.Errorf("refusal with --json: exit %d, %s", code, out)
	}
}

// TestPolicyCheckMatchesGateWorkDir: policy check judges a command against the working tree of
// the backend that would run it, as the gate does (docker's /workspace here), not the terminal's.
func TestPolicyCheckMatchesGateWorkDir(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "docker")
	e.mustRun("config", "set", "docker.cwd", "/workspace")
	if code, out, errOut := e.run("", "policy", "check", "rm -rf /workspace/build"); code != 0 {
		t.Errorf("policy check under docker = %d %s%s; want safe (inside docker's working tree)", code, out, errOut)
	}
	if code, out, _ := e.run("", "--sandbox", "local", "policy", "check", "rm -rf /workspace/build"); code != 1 {
		t.Errorf("policy check --sandbox local = %d %s; want dangerous (outside the local working tree)", code, out)
	}
}

// The audit log blanks credentials, not configuration given by environment: a session
// directory from HERMES_SANDBOX_TERMINAL_CWD stays readable, a token does not.
func TestAuditRedactsCredentialsNotConfiguration(t *testing.T) {
	e := newEnv(t)
	e.environ = append(e.environ, "HERMES_SANDBOX_VERCEL_TOKEN=vtok-secret-98765", "HERMES_SANDBOX_DOCKER_IMAGE=busybox-configured")
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("exec", "-c", "echo vtok-secret-98765 busybox-configured; ls "+e.dir)
	out := e.mustRun("audit", "show", "--session", "default")
	if strings.Contains(out, "vtok-secret") {
		t.Errorf("audit show carries the token: %s", out)
	}
	for _, want := range []string{"busybox-configured", e.dir} {
		if !strings.Contains(out, want) {
			t.Errorf("audit show lost the configured value %q: %s", want, out)
		}
	}
}

// TestVersionFlag checks that --version prints what the version command prints, and that no
// -v shorthand came with it.
func TestVersionFlag(t *testing.T) {
	e := newEnv(t)
	want := e.mustRun("version")
	if !strings.HasPrefix(want, "hermes-sandbox ") || !strings.HasSuffix(want, ")\n") {
		t.Fatalf("version printed %q; want hermes-sandbox VERSION (GO, OS/ARCH)", want)
	}
	if code, out, errOut := e.run("", "--version"); code != 0 || out != want || errOut != "" {
		t.Errorf("--version = %d, %q, %q; want 0, %q, no stderr", code, out, errOut, want)
	}
	if code, _, errOut := e.run("", "-v"); code != 2 || !strings.Contains(errOut, "unknown shorthand flag") {
		t.Errorf("-v = %d, %q; want 2 and an unknown flag", code, errOut)
	}
}
