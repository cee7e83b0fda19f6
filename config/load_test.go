package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// writeFile writes a config file under a fresh temp dir and returns its path.
func writeFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	c := NewConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("NewConfig().Validate() = %v; want nil", err)
	}
	tests := []struct {
		key, want string
	}{
		{"terminal.backend", "auto"},
		{"terminal.timeout", "3m"},
		{"terminal.shell", "auto"},
		{"terminal.output_limit", "50000"},
		{"docker.image", "python:3.12-slim"},
		{"docker.network_enabled", "false"},
		{"docker.memory_limit", "512m"},
		{"docker.cpu_quota", "1.0"},
		{"docker.pids_limit", "256"},
		{"docker.disk_limit", "10g"},
		{"docker.read_only_rootfs", "true"},
		{"docker.security_opt", "no-new-privileges:true"},
		{"docker.user", "1000:1000"},
		{"docker.cwd", "/workspace"},
		{"docker.idle_timeout", "30m"},
		{"ssh.port", "22"},
		{"ssh.key", "~/.ssh/id_ed25519"},
		{"ssh.cwd", "~"},
		{"ssh.strict_host_key_checking", "accept-new"},
		{"ssh.connect_timeout", "10s"},
		{"ssh.keepalive", "15s"},
		{"singularity.readonly", "true"},
		{"modal.app", "hermes-sandbox"},
		{"modal.timeout", "1h"},
		{"modal.block_network", "true"},
		{"daytona.auto_stop", "15m"},
		{"daytona.network_block_all", "true"},
		{"daytona.channel", "auto"},
		{"vercel.runtime", "python3.13"},
		{"vercel.timeout", "45m"},
		{"approvals.mode", "manual"},
		{"approvals.timeout", "5m"},
		{"tools.file_write", "true"},
		{"loop.max_tool_calls", "0"},
		{"audit.enabled", "true"},
		{"audit.level", "full"},
		{"audit.log_destination", "~/.local/state/hermes-sandbox/audit.log"},
		{"mcp.listen", "127.0.0.1:8765"},
		{"sandbox", "auto"},
	}
	for _, tt := range tests {
		if got, err := Get(c, tt.key); err != nil || got != tt.want {
			t.Errorf("Get(%q) = %q, %v; want %q", tt.key, got, err, tt.want)
		}
	}
	if c.Docker.MemoryLimit != 512*Mebibyte || c.Terminal.Timeout != 180*time.Second {
		t.Errorf("typed defaults = %v, %v; want 512m, 3m", c.Docker.MemoryLimit, c.Terminal.Timeout)
	}
}

func TestLoadMissingFileUsesDefaults(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope", "config.yaml")
	c, err := LoadWith(Options{Path: p})
	if err != nil {
		t.Fatalf("LoadWith(%q) = %v; want nil", p, err)
	}
	if c.Path() != p || c.SecretsPath() != filepath.Join(filepath.Dir(p), "secrets.yaml") || c.FileLoaded() {
		t.Errorf("Path, SecretsPath, FileLoaded = %q, %q, %v", c.Path(), c.SecretsPath(), c.FileLoaded())
	}
	want := NewConfig()
	if !reflect.DeepEqual(c.Docker, want.Docker) || !reflect.DeepEqual(c.Terminal, want.Terminal) {
		t.Errorf("LoadWith(missing) differs from NewConfig()")
	}
}

func TestDefaultPath(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{"HOME=/h"}, "/h/.config/hermes-sandbox/config.yaml"},
		{[]string{"HOME=/h", "XDG_CONFIG_HOME=/x"}, "/x/hermes-sandbox/config.yaml"},
		{[]string{"HOME=/h", "XDG_CONFIG_HOME=relative"}, "/h/.config/hermes-sandbox/config.yaml"},
		{[]string{"HOME=/h", "XDG_CONFIG_HOME=/x", "HERMES_SANDBOX_CONFIG=~/my.yaml"}, "/h/my.yaml"},
	}
	for _, tt := range tests {
		if got := DefaultPathFrom(tt.env); got != tt.want {
			t.Errorf("DefaultPathFrom(%q) = %q; want %q", tt.env, got, tt.want)
		}
	}
	// LoadWith with no Path uses the same rule.
	dir := t.TempDir()
	c, err := LoadWith(Options{Environ: []string{"HOME=/h", "XDG_CONFIG_HOME=" + dir}})
	if err != nil || c.Path() != filepath.Join(dir, "hermes-sandbox", "config.yaml") {
		t.Errorf("LoadWith(XDG_CONFIG_HOME=%s).Path() = %q, %v", dir, c.Path(), err)
	}
}

func TestStateDir(t *testing.T) {
	tests := []struct {
		env      []string
		stateDir string
		want     string
	}{
		{[]string{"HOME=/h"}, "", "/h/.local/state/hermes-sandbox"},
		{[]string{"HOME=/h", "XDG_STATE_HOME=/s"}, "", "/s/hermes-sandbox"},
		{[]string{"HOME=/h"}, "~/st", "/h/st"},
		{[]string{"HOME=/h"}, "/abs", "/abs"},
	}
	for _, tt := range tests {
		c, err := LoadWith(Options{Path: filepath.Join(t.TempDir(), "c.yaml"), Environ: tt.env})
		if err != nil {
			t.Fatal(err)
		}
		c.Terminal.StateDir = tt.stateDir
		if got := c.StateDir(); got != tt.want {
			t.Errorf("StateDir() with env %q, state_dir %q = %q; want %q", tt.env, tt.stateDir, got, tt.want)
		}
	}
}

const sampleConfig = `# my config
terminal:
  backend: docker
  timeout: 90s
  env_passthrough: [PATH, LANG]
docker:
  image: ubuntu:24.04   # pinned
  memory_limit: 1.5g
  cpu_quota: 2
  volumes:
    - /data:/data:ro
  env: {FOO: bar, EMPTY: }
ssh:
  cwd: ~
  port: 2222
approvals: {mode: deny}
audit:
  level: "off"
tools:
  file_write: false
`

func TestLoadFile(t *testing.T) {
	p := writeFile(t, "config.yaml", sampleConfig, 0o644)
	c, err := LoadWith(Options{Path: p})
	if err != nil {
		t.Fatalf("LoadWith = %v", err)
	}
	if !c.FileLoaded() {
		t.Errorf("FileLoaded() = false; want true")
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"terminal.backend", c.Terminal.Backend, BackendDocker},
		{"terminal.timeout", c.Terminal.Timeout, 90 * time.Second},
		{"terminal.env_passthrough", c.Terminal.EnvPassthrough, []string{"PATH", "LANG"}},
		{"docker.image", c.Docker.Image, "ubuntu:24.04"},
		{"docker.memory_limit", c.Docker.MemoryLimit, 1536 * Mebibyte},
		{"docker.cpu_quota", c.Docker.CPUQuota, 2.0},
		{"docker.volumes", c.Docker.Volumes, []string{"/data:/data:ro"}},
		{"docker.env", c.Docker.Env, map[string]string{"FOO": "bar", "EMPTY": ""}},
		{"docker.security_opt", c.Docker.SecurityOpt, []string{"no-new-privileges:true"}},
		{"ssh.cwd", c.SSH.Cwd, "~"},
		{"ssh.port", c.SSH.Port, 2222},
		{"approvals.mode", c.Approvals.Mode, ApprovalDeny},
		{"audit.level", c.Audit.Level, AuditOff},
		{"tools.file_write", c.Tools.FileWrite, false},
		{"tools.shell_execute", c.Tools.ShellExecute, true},
	}
	for _, tt := range checks {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %#v; want %#v", tt.name, tt.got, tt.want)
		}
	}
	if s := c.Source("docker.image"); s != SourceFile {
		t.Errorf("Source(docker.image) = %q; want file", s)
	}
	if s := c.Source("docker.user"); s != SourceDefault {
		t.Errorf("Source(docker.user) = %q; want default", s)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, content string
		want          []string
	}{
		{"unknown key", "docker:\n  image: x\n  netwrk_enabled: true\n",
			[]string{`config.yaml:3: unknown key "netwrk_enabled" in section docker (did you mean "network_enabled"?)`}},
		{"unknown key no suggestion", "docker:\n  flux_capacitor: 1\n",
			[]string{`config.yaml:2: unknown key "flux_capacitor" in section docker (valid keys: image,`}},
		{"unknown section", "dockr:\n  image: x\n",
			[]string{`config.yaml:1: unknown section "dockr" (did you mean "docker"?)`}},
		{"key at top level", "backend: docker\n",
			[]string{`config.yaml:1: unknown section "backend" (did you mean terminal.backend`}},
		{"malformed", "docker:\n  image: x\n    bad: [\n", []string{"config.yaml:3: invalid YAML"}},
		{"tab", "docker:\n\timage: x\n", []string{"config.yaml:2: invalid YAML"}},
		{"bool type", "terminal: {}\ndocker:\n  privileged: maybe\n",
			[]string{`config.yaml:3: docker.privileged: invalid bool "maybe"`}},
		{"int type", "ssh:\n  port: twenty\n", []string{`config.yaml:2: ssh.port: invalid integer "twenty"`}},
		{"float for int", "ssh:\n  port: 22.5\n", []string{`config.yaml:2: ssh.port: want a whole number`}},
		{"bare duration", "terminal:\n  timeout: 180\n", []string{`config.yaml:2: terminal.timeout: invalid duration "180": add a unit, e.g. 180s`}},
		{"bad size", "docker:\n  memory_limit: lots\n", []string{`config.yaml:2: docker.memory_limit: invalid size "lots"`}},
		{"bad enum", "terminal:\n  backend: kubernetess\n", []string{`config.yaml:2: terminal.backend: invalid backend "kubernetess"`}},
		{"list expected", "docker:\n  volumes: /a:/b\n", []string{`config.yaml:2: docker.volumes: want a list`}},
		{"list item", "docker:\n  volumes:\n    - /a:/b\n    - {x: y}\n", []string{`config.yaml:4: docker.volumes: list items must be strings`}},
		{"scalar expected", "docker:\n  image: [a]\n", []string{`config.yaml:2: docker.image: want a string, not a list`}},
		{"section not map", "docker: yes\n", []string{`config.yaml:1: section docker must be a mapping`}},
		{"top not map", "- a\n- b\n", []string{`config.yaml:1: invalid YAML: the top level must be a mapping`}},
		{"duplicate key", "docker:\n  image: a\n  image: b\n", []string{`config.yaml:3: duplicate key "image" in section docker (first defined on line 2)`}},
		{"two documents", "docker: {}\n---\nssh: {}\n", []string{`second YAML document`}},
		{"secret in config", "modal:\n  token_id: abc\n", []string{`config.yaml:2: modal.token_id is a secret and must not be in config.yaml: move it to secrets.yaml`}},
		{"alias conflict", "sandbox: ssh\nterminal:\n  backend: docker\n", []string{`config.yaml:1: both sandbox and terminal.backend are set`}},
		{"several at once", "docker:\n  netwrk_enabled: true\nssh:\n  prot: 22\n",
			[]string{`config.yaml:2: unknown key "netwrk_enabled"`, `config.yaml:4: unknown key "prot" in section ssh (did you mean "port"?)`}},
		{"validation located", "docker:\n  image: x\n  cpu_quota: 0\n",
			[]string{`validate config: `, `config.yaml:3: docker.cpu_quota: must be greater than 0`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, "config.yaml", tt.content, 0o600)
			c, err := LoadWith(Options{Path: p})
			if err == nil {
				t.Fatalf("LoadWith(%q) = %v, nil; want error", tt.content, c)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) = false; want true", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("LoadWith(%q) = %v; want error containing %q", tt.content, err, w)
				}
			}
		})
	}
}

func TestLoadAliasAndNulls(t *testing.T) {
	p := writeFile(t, "config.yaml", "sandbox: modal\ndocker:\n  image:\n  gpus: ~\nssh:\n", 0o600)
	c, err := LoadWith(Options{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	if c.Terminal.Backend != BackendModal {
		t.Errorf("terminal.backend = %q; want modal (from the sandbox alias)", c.Terminal.Backend)
	}
	if c.Docker.Image != "python:3.12-slim" {
		t.Errorf("docker.image = %q; want the default for a null value", c.Docker.Image)
	}
	if c.Docker.GPUs != "~" {
		t.Errorf("docker.gpus = %q; want the literal ~", c.Docker.GPUs)
	}
}

func TestSecretsFile(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	sec := filepath.Join(dir, "secrets.yaml")
	content := "modal:\n  token_id: id-1\n  token_secret: s-1\ndaytona: {api_key: dk}\nssh:\n  password: pw\n"
	if err := os.WriteFile(sec, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadWith(Options{Path: cfgPath})
	if err != nil {
		t.Fatalf("LoadWith = %v", err)
	}
	if c.Modal.TokenID.Reveal() != "id-1" || c.Modal.TokenSecret.Reveal() != "s-1" ||
		c.Daytona.APIKey.Reveal() != "dk" || c.SSH.Password.Reveal() != "pw" {
		t.Errorf("secrets = %q %q %q %q", c.Modal.TokenID.Reveal(), c.Modal.TokenSecret.Reveal(),
			c.Daytona.APIKey.Reveal(), c.SSH.Password.Reveal())
	}
	if got, _ := Get(c, "modal.token_id"); got != "***" {
		t.Errorf("Get(modal.token_id) = %q; want ***", got)
	}
	if got, _ := Get(c, "vercel.token"); got != "" {
		t.Errorf("Get(vercel.token) = %q; want empty for an unset secret", got)
	}
	if s := c.Source("modal.token_id"); s != SourceSecrets {
		t.Errorf("Source(modal.token_id) = %q; want secrets", s)
	}

	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		if err := os.Chmod(sec, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadWith(Options{Path: cfgPath})
		if err == nil || !strings.Contains(err.Error(), "chmod 600 "+sec) {
			t.Errorf("LoadWith with secrets mode %04o = %v; want error telling to chmod 600 %s", mode, err, sec)
		}
	}

	if err := os.WriteFile(sec, []byte("docker:\n  image: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sec, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadWith(Options{Path: cfgPath})
	if err == nil || !strings.Contains(err.Error(), "secrets.yaml:2: docker.image is not a secret") {
		t.Errorf("LoadWith(non-secret in secrets.yaml) = %v; want an is-not-a-secret error", err)
	}
}

// TestFingerprint: a fingerprint changes with any setting, secrets included, and not with
// where a value came from.
func TestFingerprint(t *testing.T) {
	base := NewConfig()
	same := NewConfig()
	same.setOrigin("docker.image", origin{})
	if base.Fingerprint() != same.Fingerprint() {
		t.Error("two default configurations have different fingerprints")
	}
	for name, change := range map[string]func(*Config){
		"a setting":           func(c *Config) { c.Docker.Image = "other:1" },
		"a secret":            func(c *Config) { c.Daytona.APIKey = "new-key" },
		"another secret":      func(c *Config) { c.SSH.Password = "pw" },
		"a list":              func(c *Config) { c.Terminal.EgressAllow = []string{"example.org"} },
		"terminal.keep_alive": func(c *Config) { c.Terminal.KeepAlive = 0 },
	} {
		c := NewConfig()
		change(c)
		if c.Fingerprint() == base.Fingerprint() {
			t.Errorf("changing %s leaves the fingerprint as it was", name)
		}
	}
	a, b := NewConfig(), NewConfig()
	a.Daytona.APIKey, b.Daytona.APIKey = "key-1", "key-2"
	if a.Fingerprint() == b.Fingerprint() {
		t.Error("two different API keys give one fingerprint")
	}
}
