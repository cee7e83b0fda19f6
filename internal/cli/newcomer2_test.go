//go:build unix

package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestJSONOutputs(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "docker.memory_limit", "1g")
	var list []struct {
		Key, Value, Source string
		Secret             bool
	}
	if err := json.Unmarshal([]byte(e.mustRun("config", "list", "--json")), &list); err != nil {
		t.Fatalf("config list --json is not JSON: %v", err)
	}
	found := false
	for _, kv := range list {
		if kv.Key == "docker.memory_limit" {
			found = kv.Value == "1g" && kv.Source == "file"
		}
	}
	if !found || len(list) < 20 {
		t.Errorf("config list --json: %d entries, docker.memory_limit 1g from file found = %v", len(list), found)
	}
	var v struct {
		Version, Go, OS, Arch string
		Backends              []string
	}
	if err := json.Unmarshal([]byte(e.mustRun("version", "--json")), &v); err != nil || v.Version == "" || v.Go == "" || len(v.Backends) == 0 {
		t.Errorf("version --json = %+v, %v", v, err)
	}
}

// audit init after commands already wrote an (unsealed) log seals from then on and keeps the
// earlier records; audit show says when it found nothing.
func TestAuditInitAfterExec(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("exec", "--", "echo", "before-init")
	out := e.mustRun("audit", "init")
	if !strings.Contains(out, "unsealed") || !strings.Contains(out, "Archived") {
		t.Errorf("audit init after exec did not say what it did with the earlier log:\n%s", out)
	}
	key := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	logPath := strings.TrimSpace(e.mustRun("config", "get", "audit.log_destination"))
	if strings.HasPrefix(logPath, "~/") {
		logPath = filepath.Join(e.dir, logPath[2:])
	}
	logs, _ := filepath.Glob(logPath + ".*")
	kept := false
	for _, l := range logs {
		if data, err := os.ReadFile(l); err == nil && strings.Contains(string(data), "before-init") {
			kept = true
		}
	}
	if !kept {
		t.Errorf("the record of the command run before init was not kept (archives %v)", logs)
	}
	e.mustRun("exec", "--", "echo", "after-init")
	e.environ = append(e.environ, "HERMES_SANDBOX_AUDIT_KEY="+key)
	e.mustRun("audit", "verify")
	// A second init on the sealed log still refuses without --rotate.
	if code, _, errOut := e.run("", "audit", "init"); code == 0 || !strings.Contains(errOut, "--rotate") {
		t.Errorf("audit init on a sealed log: exit %d, %s", code, errOut)
	}
	code, out, errOut := e.run("", "audit", "show", "--session", "nosuch")
	if code != 0 || out != "" || !strings.Contains(errOut, "no records for session nosuch") {
		t.Errorf("audit show of an empty selection: exit %d, %q, %q", code, out, errOut)
	}
}

// A state directory that cannot be used is reported as that, before any command runs.
func TestUnusableStateDir(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	blocker := filepath.Join(e.dir, "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.environ = append(e.environ, "XDG_STATE_HOME="+blocker)
	code, out, errOut := e.run("", "exec", "--", "echo", "ran")
	if code == 0 || strings.Contains(out, "ran") {
		t.Fatalf("exec with an unusable state directory: exit %d, %q", code, out)
	}
	if !strings.Contains(errOut, "the state directory") || !strings.Contains(errOut, "permissions") ||
		strings.Contains(errOut, "audit.enabled false") {
		t.Errorf("the error does not point at the state directory:\n%s", errOut)
	}
}
