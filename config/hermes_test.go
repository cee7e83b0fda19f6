package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHermesFlatAliases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	for _, kv := range [][2]string{
		{"terminal_backend", "docker"},
		{"terminal_docker_image", "hermes/python:3"},
		{"terminal_singularity_image", "/images/py.sif"},
		{"singularity_readonly", "false"},
		{"terminal_timeout", "90"},
		{"terminal_container_memory", "2048"},
	} {
		if err := Set(path, kv[0], kv[1]); err != nil {
			t.Fatalf("Set %s: %v", kv[0], err)
		}
	}
	c, err := LoadWith(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if c.Terminal.Backend != BackendDocker || c.Docker.Image != "hermes/python:3" ||
		c.Singularity.Image != "/images/py.sif" || c.Singularity.Readonly ||
		c.Terminal.Timeout != 90*time.Second || c.Docker.MemoryLimit != 2048*Mebibyte {
		t.Fatalf("aliases not applied: %+v %+v %+v", c.Terminal, c.Docker, c.Singularity)
	}
	if v, err := Get(c, "terminal_docker_image"); err != nil || v != "hermes/python:3" {
		t.Fatalf("Get alias = %q, %v", v, err)
	}
	if removed, err := UnsetKey(path, "terminal_docker_image"); err != nil || !removed {
		t.Fatalf("UnsetKey = %v, %v", removed, err)
	}
	if removed, err := UnsetKey(path, "terminal_docker_image"); err != nil || removed {
		t.Fatalf("second UnsetKey = %v, %v; want false, nil", removed, err)
	}
	if err := Set(path, "terminal_timeout", "-5"); err == nil {
		t.Fatal("a negative Hermes timeout was accepted")
	}
	names := []string{}
	for _, a := range Aliases() {
		names = append(names, a.Name)
	}
	for _, want := range []string{"sandbox", "terminal_backend", "terminal_docker_image", "terminal_singularity_image", "singularity_readonly"} {
		if !slices.Contains(names, want) {
			t.Errorf("Aliases() lacks %s: %v", want, names)
		}
	}
}

func TestHermesEnvAndDotenv(t *testing.T) {
	home := t.TempDir()
	writeAt(t, filepath.Join(home, ".hermes", ".env"), strings.Join([]string{
		"# Hermes secrets",
		"TERMINAL_ENV=docker",
		`TERMINAL_DOCKER_IMAGE="from-dotenv:1"`,
		"TERMINAL_TIMEOUT=45",
		"export MODAL_TOKEN_ID=ak-dotenv",
		"OPENROUTER_API_KEY=not-ours",
	}, "\n")+"\n")
	path := filepath.Join(t.TempDir(), "config.yaml")

	c, err := LoadWith(Options{Path: path, Environ: []string{"HOME=" + home}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Terminal.Backend != BackendDocker || c.Docker.Image != "from-dotenv:1" || c.Terminal.Timeout != 45*time.Second ||
		c.Modal.TokenID.Reveal() != "ak-dotenv" {
		t.Fatalf("~/.hermes/.env not applied: backend=%s image=%s timeout=%s", c.Terminal.Backend, c.Docker.Image, c.Terminal.Timeout)
	}
	if src := c.Source("docker.image"); src != SourceEnv {
		t.Errorf("source of docker.image = %s, want env", src)
	}

	// The process env beats ~/.hermes/.env; HERMES_SANDBOX_* beats both.
	c, err = LoadWith(Options{Path: path, Environ: []string{"HOME=" + home,
		"TERMINAL_DOCKER_IMAGE=from-env:2", "TERMINAL_TIMEOUT=30", "HERMES_SANDBOX_TERMINAL_TIMEOUT=10s",
		"TERMINAL_SSH_HOST=box.example", "TERMINAL_DOCKER_FORWARD_ENV=[\"GITHUB_TOKEN\",\"NPM_TOKEN\"]"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Docker.Image != "from-env:2" || c.Terminal.Timeout != 10*time.Second || c.SSH.Host != "box.example" ||
		!slices.Equal(c.Terminal.EnvPassthrough, []string{"GITHUB_TOKEN", "NPM_TOKEN"}) {
		t.Fatalf("precedence wrong: image=%s timeout=%s host=%s pass=%v", c.Docker.Image, c.Terminal.Timeout, c.SSH.Host, c.Terminal.EnvPassthrough)
	}

	// Without HOME in the given environment, the real ~/.hermes is never read.
	if c, err := LoadWith(Options{Path: path}); err != nil || c.Docker.Image == "from-dotenv:1" {
		t.Fatalf("an empty environment read a .hermes directory: %v", err)
	}

	if _, err := LoadWith(Options{Path: path, Environ: []string{"HOME=" + home, "TERMINAL_TIMEOUT=soon"}}); err == nil ||
		!strings.Contains(err.Error(), "TERMINAL_TIMEOUT") {
		t.Fatalf("bad TERMINAL_TIMEOUT: err = %v, want one naming the variable", err)
	}
}

// hardenedTemplate is the seed's hardened Hermes config (terminal.docker.* and friends) plus a
// few keys that have no equivalent here.
const hardenedTemplate = `
model:
  default: anthropic/claude-opus-4
terminal:
  backend: docker
  timeout: 120
  lifetime_seconds: 300
  docker:
    network_enabled: false
    memory_limit: 1g
    cpu_quota: 0.5
    read_only_rootfs: true
    privileged: false
    security_opt: ["no-new-privileges:true"]
    user: "1000:1000"
    cwd: /workspace
tools:
  shell_execute: true
  code_execution: false
  file_write: true
  file_system: true
loop:
  max_tool_calls: 50
audit:
  enabled: true
  level: commands
  log_destination: ~/.hermes/audit.log
modal_token_id: ak-123
modal_token_secret: as-456
`

func TestImportHermesTemplate(t *testing.T) {
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "config.yaml"), hardenedTemplate)
	writeAt(t, filepath.Join(dir, ".env"), "TERMINAL_ENV=local\nTERMINAL_DOCKER_IMAGE=hermes/python:3\nOPENROUTER_API_KEY=x\n")
	imp, err := ReadHermes(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"config.yaml: model.default", "config.yaml: terminal.lifetime_seconds", ".env: OPENROUTER_API_KEY"} {
		if !slices.Contains(imp.Ignored, want) {
			t.Errorf("Ignored lacks %q: %v", want, imp.Ignored)
		}
	}
	final := imp.Final()
	kvs := make([]KV, len(final))
	for i, s := range final {
		kvs[i] = KV{Key: s.Key, Value: s.Value}
		if s.Key == "terminal.backend" && (s.Value != "docker" || !strings.HasPrefix(s.From, "config.yaml")) {
			t.Errorf("config.yaml must win over .env for terminal.backend: %+v", s)
		}
	}
	path := filepath.Join(t.TempDir(), "hs", "config.yaml")
	if err := SetMany(path, kvs); err != nil {
		t.Fatal(err)
	}
	c, err := LoadWith(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if c.Terminal.Backend != BackendDocker || c.Terminal.Timeout != 120*time.Second || c.Docker.NetworkEnabled ||
		c.Docker.MemoryLimit != Gibibyte || c.Docker.CPUQuota != 0.5 || !c.Docker.ReadOnlyRootfs || c.Docker.User != "1000:1000" ||
		c.Docker.Image != "hermes/python:3" || c.Tools.CodeExecution || c.Loop.MaxToolCalls != 50 || c.Audit.Level != "commands" ||
		c.Modal.TokenID.Reveal() != "ak-123" || c.Modal.TokenSecret.Reveal() != "as-456" {
		t.Fatalf("import did not convert the template: %+v %+v %+v", c.Terminal, c.Docker, c.Tools)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "ak-123") {
		t.Fatal("a secret was written to config.yaml instead of secrets.yaml")
	}
	if sec, err := os.ReadFile(SecretsPathFor(path)); err != nil || !strings.Contains(string(sec), "as-456") {
		t.Fatalf("secrets.yaml lacks the Modal secret: %v", err)
	}
}

func TestSetManyIsAllOrNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := Set(path, "docker.image", "keep:1"); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	err := SetMany(path, []KV{{Key: "docker.image", Value: "new:2"}, {Key: "modal.token_id", Value: "t"}, {Key: "docker.memory_limit", Value: "lots"}})
	if err == nil {
		t.Fatal("an invalid value was accepted")
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Fatal("config.yaml changed although one value was invalid")
	}
	if _, err := os.Stat(SecretsPathFor(path)); !os.IsNotExist(err) {
		t.Fatal("secrets.yaml was written although one value was invalid")
	}
}

func writeAt(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
