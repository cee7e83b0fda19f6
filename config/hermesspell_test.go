package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportHermesTypical imports a full Hermes Agent config as a user has it (testdata):
// every key with an equivalent is mapped, every other one is listed, nothing aborts.
func TestImportHermesTypical(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "hermes-typical.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "config.yaml"), string(data))
	writeAt(t, filepath.Join(dir, ".env"), "OPENROUTER_API_KEY=sk-or-x\nTERMINAL_DOCKER_FORWARD_ENV=[\"GH_TOKEN\"]\n")
	imp, err := ReadHermes(dir, nil)
	if err != nil {
		t.Fatalf("ReadHermes: %v", err)
	}
	if len(imp.Failed) != 0 {
		t.Errorf("Failed = %+v; want none", imp.Failed)
	}
	got := map[string]Imported{}
	for _, s := range imp.Final() {
		got[s.Key] = s
	}
	for key, want := range map[string]string{
		"approvals.mode":              "manual",
		"terminal.persistence":        "session",
		"docker.network":              "none",
		"approvals.command_allowlist": `["recursive delete","git force push"]`,
		"terminal.env_passthrough":    `["GITHUB_TOKEN","NPM_TOKEN"]`,
		"docker.env":                  `{"PYTHONUNBUFFERED":"1"}`,
		"docker.memory_limit":         "5120m",
		"terminal.timeout":            "180s",
		"approvals.timeout":           "60s",
		"docker.image":                "nikolaik/python-nodejs:python3.11-nodejs20",
	} {
		if got[key].Value != want {
			t.Errorf("import of %s = %q (from %s); want %q", key, got[key].Value, got[key].From, want)
		}
	}
	if n := got["approvals.mode"].Note; !strings.Contains(n, "smart") || !strings.Contains(n, "manual") {
		t.Errorf("approvals.mode smart has no note saying how it was mapped: %q", n)
	}
	for _, want := range []string{
		"config.yaml: model.default", "config.yaml: terminal.docker_extra_args", "config.yaml: terminal.container_disk",
		"config.yaml: terminal.lifetime_seconds", ".env: OPENROUTER_API_KEY",
	} {
		if !slices.Contains(imp.Ignored, want) {
			t.Errorf("Ignored lacks %q: %v", want, imp.Ignored)
		}
	}
	// Every leaf of the file is either imported or listed: nothing is dropped silently.
	for _, line := range []string{"terminal.docker_forward_env", "terminal.container_persistent", "terminal.docker_network", "command_allowlist"} {
		found := false
		for _, s := range imp.Set {
			found = found || s.From == "config.yaml: "+line
		}
		if !found {
			t.Errorf("%s was neither imported nor listed", line)
		}
	}
	// The whole import writes and loads.
	path := filepath.Join(t.TempDir(), "config.yaml")
	var kvs []KV
	for _, s := range imp.Final() {
		kvs = append(kvs, KV{Key: s.Key, Value: s.Value})
	}
	if err := SetMany(path, kvs); err != nil {
		t.Fatalf("SetMany(imported): %v", err)
	}
	c, err := LoadWith(Options{Path: path})
	if err != nil {
		t.Fatalf("load after import: %v", err)
	}
	if c.Approvals.Mode != ApprovalManual || c.Terminal.Persistence != PersistenceSession || c.Docker.Network != NetworkNone ||
		!slices.Equal(c.Approvals.CommandAllowlist, []string{"recursive delete", "git force push"}) {
		t.Errorf("loaded import: mode=%s persistence=%s network=%s allowlist=%v",
			c.Approvals.Mode, c.Terminal.Persistence, c.Docker.Network, c.Approvals.CommandAllowlist)
	}
}

// TestImportHermesKeepsGoing: one value that cannot be taken over is listed with its reason and
// the rest is still imported.
func TestImportHermesKeepsGoing(t *testing.T) {
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "config.yaml"), strings.Join([]string{
		"terminal:",
		"  backend: docker",
		"  docker_image: hermes/python:3",
		"  container_memory: lots",
		"  docker_network: true",
		"approvals:",
		"  mode: yolo",
	}, "\n")+"\n")
	imp, err := ReadHermes(dir, nil)
	if err != nil {
		t.Fatalf("ReadHermes aborted on one bad value: %v", err)
	}
	failed := map[string]string{}
	for _, f := range imp.Failed {
		failed[f.Key] = f.Reason
	}
	if !strings.Contains(failed["approvals.mode"], "approvals.mode off") {
		t.Errorf("approvals.mode yolo: reason %q does not point at approvals.mode off", failed["approvals.mode"])
	}
	if failed["docker.memory_limit"] == "" {
		t.Errorf("container_memory: lots was not listed as failed: %+v", imp.Failed)
	}
	keys := map[string]Imported{}
	for _, s := range imp.Final() {
		keys[s.Key] = s
	}
	if keys["docker.image"].Value != "hermes/python:3" || keys["terminal.backend"].Value != "docker" {
		t.Errorf("the good keys were not imported: %+v", imp.Set)
	}
	if n := keys["docker.network"]; n.Value != "open" || !strings.Contains(n.Note, "none") {
		t.Errorf("docker_network: true = %+v; want open with a note on the default", n)
	}
}

// TestHermesSpellings: each Hermes spelling reaches the same key through config set and gets a
// pointer in the config file; one table (hermesYAML, hermesFlat, hermesValued) serves both.
func TestHermesSpellings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	for _, kv := range [][2]string{
		{"terminal.docker_image", "hermes-sandbox/python:3"},
		{"terminal.backend", "vercel_sandbox"},
		{"terminal.container_persistent", "false"},
		{"approvals.mode", "smart"},
		{"command_allowlist", "git force push"},
		{"terminal.docker_forward_env", "GITHUB_TOKEN"},
	} {
		if err := Set(path, kv[0], kv[1]); err != nil {
			t.Fatalf("Set(%q, %q) = %v; want the Hermes spelling accepted", kv[0], kv[1], err)
		}
	}
	c, err := LoadWith(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if c.Docker.Image != "hermes-sandbox/python:3" || c.Terminal.Backend != "vercel" ||
		c.Terminal.Persistence != PersistenceEphemeral || c.Approvals.Mode != ApprovalManual ||
		!slices.Equal(c.Approvals.CommandAllowlist, []string{"git force push"}) ||
		!slices.Equal(c.Terminal.EnvPassthrough, []string{"GITHUB_TOKEN"}) {
		t.Fatalf("Hermes spellings not applied: image=%s backend=%s persistence=%s mode=%s allow=%v pass=%v",
			c.Docker.Image, c.Terminal.Backend, c.Terminal.Persistence, c.Approvals.Mode,
			c.Approvals.CommandAllowlist, c.Terminal.EnvPassthrough)
	}
	if v, err := Get(c, "terminal.docker_image"); err != nil || v != "hermes-sandbox/python:3" {
		t.Errorf("Get(terminal.docker_image) = %q, %v", v, err)
	}
	for _, mode := range []string{"yolo", "always"} {
		err := Set(path, "approvals.mode", mode)
		if err == nil || !strings.Contains(err.Error(), "approvals.mode off") {
			t.Errorf("Set(approvals.mode, %s) = %v; want a pointer to approvals.mode off", mode, err)
		}
	}

	// The same spellings pasted into config.yaml get a pointer, not just "unknown key".
	for _, tc := range []struct{ yaml, want string }{
		{"terminal:\n  docker_image: x\n", "spelling of docker.image: write image: under docker:"},
		{"terminal:\n  container_persistent: true\n", "terminal.persistence"},
		{"terminal:\n  docker_network: false\n", "docker.network"},
		{"command_allowlist: [a]\n", "approvals.command_allowlist"},
		{"terminal:\n  backend: vercel_sandbox\n", "write vercel"},
		{"approvals:\n  mode: smart\n", "write manual"},
		{"approvals:\n  mode: yolo\n", "approvals.mode off"},
	} {
		p := filepath.Join(t.TempDir(), "config.yaml")
		writeAt(t, p, tc.yaml)
		_, err := LoadWith(Options{Path: p})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("load %q = %v; want an error containing %q", tc.yaml, err, tc.want)
		}
	}
	if HermesPointer("chat") == "" || !strings.Contains(HermesPointer("chat"), "mcp") {
		t.Errorf("HermesPointer(chat) = %q; want a pointer to mcp", HermesPointer("chat"))
	}
}
