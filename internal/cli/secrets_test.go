//go:build unix

package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsAddListRm stores a brokered secret from stdin, lists it without its value, and
// removes it: the value lands only in secrets.yaml (mode 0600), never in config.yaml.
func TestSecretsAddListRm(t *testing.T) {
	e := newEnv(t)
	const token = "ghp_S3cretValueThatMustNotLeak"
	code, out, errOut := e.run(token+"\n", "secrets", "add", "GITHUB_TOKEN", "--host", "github.com", "--host", "api.github.com")
	if code != 0 {
		t.Fatalf("secrets add exited %d: %s%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, token) {
		t.Errorf("secrets add printed the value: %q", out+errOut)
	}
	cfgDir := filepath.Join(e.dir, "config", "hermes-sandbox")
	cfgData, err := os.ReadFile(filepath.Join(cfgDir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cfgData), token) || !strings.Contains(string(cfgData), "GITHUB_TOKEN") ||
		!strings.Contains(string(cfgData), "api.github.com") {
		t.Errorf("config.yaml = %q; want the entry without the value", cfgData)
	}
	sec := filepath.Join(cfgDir, "secrets.yaml")
	st, err := os.Stat(sec)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("secrets.yaml mode = %04o; want 0600", st.Mode().Perm())
	}
	secData, _ := os.ReadFile(sec)
	if !strings.Contains(string(secData), token) || strings.Contains(string(secData), token+"\n\n") {
		t.Errorf("secrets.yaml does not hold the value (trailing newline dropped): %q", secData)
	}

	list := e.mustRun("secrets", "list")
	if !strings.Contains(list, "GITHUB_TOKEN") || !strings.Contains(list, "github.com, api.github.com") ||
		!strings.Contains(list, "value stored") || strings.Contains(list, token) {
		t.Errorf("secrets list = %q; want the name, hosts and 'value stored', never the value", list)
	}
	if get := e.mustRun("config", "get", "secrets.values"); strings.Contains(get, token) {
		t.Errorf("config get secrets.values printed the value: %q", get)
	}

	// A second secret with its value from the environment stores no value.
	e.mustRun("secrets", "add", "NPM_TOKEN", "--host", "registry.npmjs.org", "--value-from", "env")
	if list := e.mustRun("secrets", "list"); !strings.Contains(list, "NPM_TOKEN") || !strings.Contains(list, "value from env, missing") {
		t.Errorf("secrets list = %q; want NPM_TOKEN with its value from env, missing", list)
	}

	e.mustRun("secrets", "rm", "GITHUB_TOKEN")
	secData, _ = os.ReadFile(sec)
	cfgData, _ = os.ReadFile(filepath.Join(cfgDir, "config.yaml"))
	if strings.Contains(string(secData), token) || strings.Contains(string(cfgData), "GITHUB_TOKEN") {
		t.Errorf("after rm: secrets.yaml %q, config.yaml %q; want GITHUB_TOKEN gone from both", secData, cfgData)
	}
	if code, _, errOut := e.run("", "secrets", "rm", "GITHUB_TOKEN"); code == 0 || !strings.Contains(errOut, "no secret named") {
		t.Errorf("second rm exited %d (%q); want an error naming the missing secret", code, errOut)
	}
}

// TestSecretsAddRefuses covers bad input: no value, a line break in it, no host, a bad name.
func TestSecretsAddRefuses(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"secrets", "add", "T", "--host", "example.com"}, "value is empty"},
		{"a\nInjected: 1", []string{"secrets", "add", "T", "--host", "example.com"}, "line break"},
		{"v", []string{"secrets", "add", "T"}, "hosts is empty"},
		{"v", []string{"secrets", "add", "1BAD", "--host", "example.com"}, "not a valid environment variable name"},
		{"v", []string{"secrets", "add", "T", "--host", "example.com:8443"}, "without a port"},
		{"v", []string{"secrets", "add", "T", "--host", "example.com", "--format", "token"}, "%s exactly once"},
		{"v", []string{"secrets", "add", "T", "--host", "example.com", "--value-from", "vault"}, "want secrets.yaml or env"},
	} {
		code, out, errOut := e.run(tc.stdin, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q (stdin %q) exited %d, %q%q; want an error containing %q", tc.args, tc.stdin, code, out, errOut, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "config", "hermes-sandbox", "secrets.yaml")); err == nil {
		t.Errorf("a refused add wrote secrets.yaml")
	}
}

// TestSecretsDoctorAndRefusal: doctor says where brokering is not available, and a backend
// that cannot broker refuses to run while secrets.broker has entries, rather than pass the
// value in.
func TestSecretsDoctorAndRefusal(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("config", "set", "local.network", "host")
	out := e.mustRun("doctor")
	if !strings.Contains(out, "secrets: not available") {
		t.Errorf("doctor = %q; want a 'secrets: not available' line", out)
	}
	code, out, errOut := e.run("s3cret-value", "secrets", "add", "API_KEY", "--host", "api.example.com")
	if code != 0 {
		t.Fatalf("secrets add = %d %q %q", code, out, errOut)
	}
	code, out, errOut = e.run("", "exec", "-c", "echo ${API_KEY:-unset}")
	if code == 0 || !strings.Contains(errOut, "secrets.broker") || strings.Contains(out+errOut, "s3cret-value") {
		t.Errorf("exec with a brokered secret on local.network host = %d %q %q; want a refusal naming secrets.broker", code, out, errOut)
	}
}
