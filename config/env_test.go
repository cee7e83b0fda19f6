package config

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func loadEnv(t *testing.T, file string, env ...string) (*Config, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if file != "" {
		p = writeFile(t, "config.yaml", file, 0o600)
	}
	return LoadWith(Options{Path: p, Environ: env})
}

func TestEnvOverrides(t *testing.T) {
	tests := []struct {
		env  string
		get  func(*Config) any
		want any
	}{
		{"HERMES_SANDBOX_DOCKER_MEMORY_LIMIT=1g", func(c *Config) any { return c.Docker.MemoryLimit }, Gibibyte},
		{"HERMES_SANDBOX_TERMINAL_BACKEND=docker", func(c *Config) any { return c.Terminal.Backend }, BackendDocker},
		{"HERMES_SANDBOX_SANDBOX=ssh", func(c *Config) any { return c.Terminal.Backend }, BackendSSH},
		{"HERMES_SANDBOX_TERMINAL_TIMEOUT=45s", func(c *Config) any { return c.Terminal.Timeout }, 45 * time.Second},
		{"HERMES_SANDBOX_DOCKER_NETWORK_ENABLED=true", func(c *Config) any { return c.Docker.NetworkEnabled }, true},
		{"HERMES_SANDBOX_DOCKER_NETWORK=allowlist", func(c *Config) any { return c.Docker.EffectiveNetwork() }, NetworkAllowlist},
		{"HERMES_SANDBOX_KUBERNETES_NETWORK=allowlist", func(c *Config) any { return c.Kubernetes.EffectiveNetwork() }, NetworkAllowlist},
		{"HERMES_SANDBOX_KUBERNETES_NETWORK_ENABLED=true", func(c *Config) any { return c.Kubernetes.EffectiveNetwork() }, NetworkOpen},
		{"HERMES_SANDBOX_TERMINAL_EGRESS_ALLOW=pypi.org, *.github.com", func(c *Config) any { return c.Terminal.EgressAllow }, []string{"pypi.org", "*.github.com"}},
		{"HERMES_SANDBOX_DOCKER_CPU_QUOTA=0.5", func(c *Config) any { return c.Docker.CPUQuota }, 0.5},
		{"HERMES_SANDBOX_DOCKER_VOLUMES=/a:/a, /b:/b:ro", func(c *Config) any { return c.Docker.Volumes }, []string{"/a:/a", "/b:/b:ro"}},
		{"HERMES_SANDBOX_DOCKER_ENV=A=1,B=two", func(c *Config) any { return c.Docker.Env }, map[string]string{"A": "1", "B": "two"}},
		{"HERMES_SANDBOX_TERMINAL_ENV_PASSTHROUGH=[HOME, PATH]", func(c *Config) any { return c.Terminal.EnvPassthrough }, []string{"HOME", "PATH"}},
		{"HERMES_SANDBOX_SSH_STRICT_HOST_KEY_CHECKING=yes", func(c *Config) any { return c.SSH.StrictHostKeyChecking }, HostKeyYes},
		{"HERMES_SANDBOX_MODAL_TOKEN_ID=tid", func(c *Config) any { return c.Modal.TokenID.Reveal() }, "tid"},
		{"HERMES_SANDBOX_LOOP_MAX_TOOL_CALLS=50", func(c *Config) any { return c.Loop.MaxToolCalls }, 50},
		{"HERMES_SANDBOX_MCP_LISTEN=0.0.0.0:9000", func(c *Config) any { return c.MCP.Listen }, "0.0.0.0:9000"},
		{"HERMES_SANDBOX_DOCKER_IMAGE=", func(c *Config) any { return c.Docker.Image }, "python:3.12-slim"}, // empty = unset
		{"TERMINAL_SSH_HOST=box.example", func(c *Config) any { return c.SSH.Host }, "box.example"},
		{"TERMINAL_SSH_USER=bob", func(c *Config) any { return c.SSH.User }, "bob"},
		{"TERMINAL_SSH_KEY=~/.ssh/other", func(c *Config) any { return c.SSH.Key }, "~/.ssh/other"},
		{"TERMINAL_SSH_PORT=2200", func(c *Config) any { return c.SSH.Port }, 2200},
		{"MODAL_TOKEN_ID=mid", func(c *Config) any { return c.Modal.TokenID.Reveal() }, "mid"},
		{"MODAL_TOKEN_SECRET=msec", func(c *Config) any { return c.Modal.TokenSecret.Reveal() }, "msec"},
		{"DAYTONA_API_KEY=dk", func(c *Config) any { return c.Daytona.APIKey.Reveal() }, "dk"},
		{"VERCEL_TOKEN=vt", func(c *Config) any { return c.Vercel.Token.Reveal() }, "vt"},
		{"VERCEL_OIDC_TOKEN=oidc", func(c *Config) any { return c.Vercel.OIDCToken.Reveal() }, "oidc"},
		// Not ours: ignored.
		{"HERMES_SANDBOX_CONFIG_DIR_UNRELATED_TO_ANYTHING_AT_ALL=1", func(c *Config) any { return c.Terminal.Backend }, BackendAuto},
		{"HERMES_SANDBOX_TEST_REQUIRE=docker", func(c *Config) any { return c.Terminal.Backend }, BackendAuto},
		{"HERMES_SANDBOX_MCP_TOKEN=abc", func(c *Config) any { return c.MCP.Listen }, "127.0.0.1:8765"},
		{"HERMES_SANDBOX_COLOR=1", func(c *Config) any { return c.Terminal.Backend }, BackendAuto},
	}
	for _, tt := range tests {
		c, err := loadEnv(t, "", tt.env)
		if err != nil {
			t.Errorf("LoadWith(env %q) = %v", tt.env, err)
			continue
		}
		if got := tt.get(c); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("LoadWith(env %q) = %#v; want %#v", tt.env, got, tt.want)
		}
	}
}

func TestEnvPrecedence(t *testing.T) {
	file := "ssh:\n  host: from-file\n  port: 2022\nterminal:\n  backend: local\n"
	p := writeFile(t, "config.yaml", file, 0o600)
	if err := Set(p, "modal.token_id", "from-secrets"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  []string
		get  func(*Config) any
		want any
		src  Source
		key  string
	}{
		{"file beats default", nil, func(c *Config) any { return c.SSH.Host }, "from-file", SourceFile, "ssh.host"},
		{"legacy beats file", []string{"TERMINAL_SSH_HOST=legacy"}, func(c *Config) any { return c.SSH.Host }, "legacy", SourceEnv, "ssh.host"},
		{"new name beats legacy", []string{"TERMINAL_SSH_HOST=legacy", "HERMES_SANDBOX_SSH_HOST=new"},
			func(c *Config) any { return c.SSH.Host }, "new", SourceEnv, "ssh.host"},
		{"env beats file", []string{"HERMES_SANDBOX_TERMINAL_BACKEND=docker"}, func(c *Config) any { return c.Terminal.Backend }, BackendDocker, SourceEnv, "terminal.backend"},
		{"full name beats alias", []string{"HERMES_SANDBOX_SANDBOX=ssh", "HERMES_SANDBOX_TERMINAL_BACKEND=docker"},
			func(c *Config) any { return c.Terminal.Backend }, BackendDocker, SourceEnv, "terminal.backend"},
		{"provider var is only a fallback", []string{"MODAL_TOKEN_ID=ambient"},
			func(c *Config) any { return c.Modal.TokenID.Reveal() }, "from-secrets", SourceSecrets, "modal.token_id"},
		{"hermes var beats secrets file", []string{"HERMES_SANDBOX_MODAL_TOKEN_ID=explicit"},
			func(c *Config) any { return c.Modal.TokenID.Reveal() }, "explicit", SourceEnv, "modal.token_id"},
	}
	for _, tt := range tests {
		c, err := LoadWith(Options{Path: p, Environ: tt.env})
		if err != nil {
			t.Errorf("%s: LoadWith = %v", tt.name, err)
			continue
		}
		if got := tt.get(c); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: LoadWith(env %q) = %#v; want %#v", tt.name, tt.env, got, tt.want)
		}
		if got := c.Source(tt.key); got != tt.src {
			t.Errorf("%s: Source(%q) = %q; want %q", tt.name, tt.key, got, tt.src)
		}
	}
}

func TestEnvErrors(t *testing.T) {
	tests := []struct {
		env    []string
		ignore []string
		want   string
	}{
		{[]string{"HERMES_SANDBOX_DOCKER_MEMORY_LIMIT=lots"},
			nil, `load config: env HERMES_SANDBOX_DOCKER_MEMORY_LIMIT: docker.memory_limit: invalid size "lots"`},
		{[]string{"HERMES_SANDBOX_TERMINAL_TIMEOUT=30"},
			nil, `env HERMES_SANDBOX_TERMINAL_TIMEOUT: terminal.timeout: invalid duration "30": add a unit, e.g. 30s`},
		{[]string{"HERMES_SANDBOX_SANDBOX=kubernetess"}, nil, `env HERMES_SANDBOX_SANDBOX: terminal.backend: invalid backend "kubernetess"`},
		{[]string{"TERMINAL_SSH_PORT=ssh"}, nil, `env TERMINAL_SSH_PORT: ssh.port: invalid integer "ssh"`},
		{[]string{"HERMES_SANDBOX_DOCKER_NETWRK_ENABLED=1"},
			nil, `env HERMES_SANDBOX_DOCKER_NETWRK_ENABLED: unknown setting (did you mean HERMES_SANDBOX_DOCKER_NETWORK_ENABLED?)`},
		{[]string{"HERMES_SANDBOX_DOCKER_FLUX=1"}, nil, `env HERMES_SANDBOX_DOCKER_FLUX: unknown setting`},
		{[]string{"HERMES_SANDBOX_TERMINAL_BACKED=docker"}, nil, `did you mean HERMES_SANDBOX_TERMINAL_BACKEND?`},
		{[]string{"HERMES_SANDBOX_DOCKER_MEMORY_LIMIT=1m"}, nil, `validate config: env HERMES_SANDBOX_DOCKER_MEMORY_LIMIT: docker.memory_limit: must be at least 6m`},
		{[]string{"HERMES_SANDBOX_SSH_PORT=0"}, nil, `env HERMES_SANDBOX_SSH_PORT: ssh.port: must be between 1 and 65535`},
	}
	for _, tt := range tests {
		_, err := loadEnv(t, "", tt.env...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadWith(env %q) = %v; want error containing %q", tt.env, err, tt.want)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
		}
	}
}

func TestEnvIgnoreList(t *testing.T) {
	env := []string{"HERMES_SANDBOX_DOCKER_FLUX=1", "HERMES_SANDBOX_SSH_AGENT_SOCK=x"}
	if _, err := loadEnv(t, "", env...); err == nil {
		t.Fatalf("LoadWith(env %q) = nil; want unknown-setting errors", env)
	}
	p := filepath.Join(t.TempDir(), "config.yaml")
	_, err := LoadWith(Options{Path: p, Environ: env, IgnoreEnv: []string{"HERMES_SANDBOX_DOCKER_FLUX", "HERMES_SANDBOX_SSH_AGENT_*"}})
	if err != nil {
		t.Errorf("LoadWith(env %q, ignored) = %v; want nil", env, err)
	}
}

func TestEnvSecretValueNotEchoed(t *testing.T) {
	// Secrets never fail to parse, but a validation error elsewhere must
	// not print any secret value.
	_, err := loadEnv(t, "", "HERMES_SANDBOX_MODAL_TOKEN_SECRET=topsecret", "HERMES_SANDBOX_SSH_PORT=0")
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Errorf("LoadWith = %v; want an error that does not echo the secret", err)
	}
}
