package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"unknown backend", func(c *Config) { c.Terminal.Backend = "k8s" }, "terminal.backend: invalid backend"},
		{"zero timeout", func(c *Config) { c.Terminal.Timeout = 0 }, "terminal.timeout: must be greater than 0"},
		{"relative shell", func(c *Config) { c.Terminal.Shell = "zsh" }, "terminal.shell: invalid shell"},
		{"absolute shell", func(c *Config) { c.Terminal.Shell = "/bin/zsh" }, ""},
		{"small output limit", func(c *Config) { c.Terminal.OutputLimit = 999 }, "terminal.output_limit: must be at least 1000"},
		{"bad passthrough", func(c *Config) { c.Terminal.EnvPassthrough = []string{"A B"} }, "terminal.env_passthrough"},
		{"relative state dir", func(c *Config) { c.Terminal.StateDir = "state" }, "terminal.state_dir"},
		{"home state dir", func(c *Config) { c.Terminal.StateDir = "~/state" }, ""},
		{"empty image", func(c *Config) { c.Docker.Image = "" }, "docker.image: must not be empty"},
		{"memory 6m ok", func(c *Config) { c.Docker.MemoryLimit = 6 * Mebibyte }, ""},
		{"memory too small", func(c *Config) { c.Docker.MemoryLimit = 5 * Mebibyte }, "docker.memory_limit: must be at least 6m, got 5m"},
		{"zero cpu", func(c *Config) { c.Docker.CPUQuota = 0 }, "docker.cpu_quota: must be greater than 0"},
		{"zero branch limit", func(c *Config) { c.Local.BranchMaxBytes = 0 }, "local.branch_max_bytes: is 0"},
		{"branch limit 4g", func(c *Config) { c.Local.BranchMaxBytes = 4 * Gibibyte }, ""},
		{"negative pids", func(c *Config) { c.Docker.PidsLimit = -1 }, "docker.pids_limit: must not be negative"},
		{"relative docker cwd", func(c *Config) { c.Docker.Cwd = "work" }, "docker.cwd"},
		{"good volumes", func(c *Config) {
			c.Docker.Volumes = []string{"/a:/a", "~/x:/x:ro", "cache:/cache:rw"}
		}, ""},
		{"volume no container", func(c *Config) { c.Docker.Volumes = []string{"/a"} }, "want HOST:CONTAINER"},
		{"volume bad mode", func(c *Config) { c.Docker.Volumes = []string{"/a:/a:rx"} }, `mode "rx" must be ro or rw`},
		{"env key", func(c *Config) { c.Docker.Env = map[string]string{"A=B": "x"} }, "docker.env"},
		{"extra host", func(c *Config) { c.Docker.ExtraHosts = []string{"db:10.0.0.1", "gw:host-gateway"} }, ""},
		{"bad extra host", func(c *Config) { c.Docker.ExtraHosts = []string{"db"} }, "docker.extra_hosts"},
		{"docker host", func(c *Config) { c.Docker.Host = "unix:///var/run/docker.sock" }, ""},
		{"bad docker host", func(c *Config) { c.Docker.Host = "/var/run/docker.sock" }, "docker.host"},
		{"negative idle", func(c *Config) { c.Docker.IdleTimeout = -time.Second }, "docker.idle_timeout"},
		{"negative pool", func(c *Config) { c.Docker.PoolSize = -1 }, "docker.pool_size"},
		{"network allowlist", func(c *Config) {
			c.Docker.Network, c.Docker.EgressAllow = NetworkAllowlist, []string{"pypi.org", "*.github.com", "git.example.com:22"}
		}, ""},
		{"network allowlist empty", func(c *Config) { c.Docker.Network = NetworkAllowlist }, ""},
		{"network bad", func(c *Config) { c.Docker.Network = "filtered" }, "docker.network: invalid network mode"},
		{"egress ip", func(c *Config) {
			c.Docker.Network, c.Docker.EgressAllow = NetworkAllowlist, []string{"10.0.0.1"}
		}, "docker.egress_allow: \"10.0.0.1\" is an IP address"},
		{"egress wildcard tld", func(c *Config) {
			c.Docker.Network, c.Docker.EgressAllow = NetworkAllowlist, []string{"*.com"}
		}, "docker.egress_allow"},
		{"egress without allowlist", func(c *Config) { c.Docker.EgressAllow = []string{"pypi.org"} }, "docker.egress_allow: is set but docker.network is none"},
		{"egress with open", func(c *Config) { c.Docker.NetworkEnabled, c.Docker.EgressAllow = true, []string{"pypi.org"} }, "docker.network is open"},
		{"kubernetes allowlist", func(c *Config) {
			c.Kubernetes.Network, c.Kubernetes.EgressAllow = NetworkAllowlist, []string{"pypi.org", "*.github.com", "git.example.com:22"}
		}, ""},
		{"kubernetes allowlist empty", func(c *Config) { c.Kubernetes.Network = NetworkAllowlist }, ""},
		{"kubernetes network bad", func(c *Config) { c.Kubernetes.Network = "filtered" }, `kubernetes.network: invalid network mode "filtered"`},
		{"kubernetes egress ip", func(c *Config) {
			c.Kubernetes.Network, c.Kubernetes.EgressAllow = NetworkAllowlist, []string{"10.0.0.1"}
		}, "kubernetes.egress_allow: \"10.0.0.1\" is an IP address"},
		{"kubernetes egress without allowlist", func(c *Config) { c.Kubernetes.EgressAllow = []string{"pypi.org"} },
			"kubernetes.egress_allow: is set but kubernetes.network is none, so nothing would apply it: set kubernetes.network allowlist"},
		{"kubernetes egress with open", func(c *Config) { c.Kubernetes.NetworkEnabled, c.Kubernetes.EgressAllow = true, []string{"pypi.org"} },
			"kubernetes.network is open"},
		{"terminal egress bad", func(c *Config) { c.Terminal.EgressAllow = []string{"https://pypi.org"} }, "terminal.egress_allow"},
		{"terminal egress ok", func(c *Config) { c.Terminal.EgressAllow = []string{"pypi.org:443"} }, ""},
		{"port 0", func(c *Config) { c.SSH.Port = 0 }, "ssh.port: must be between 1 and 65535, got 0"},
		{"port 65536", func(c *Config) { c.SSH.Port = 65536 }, "ssh.port"},
		{"host key no", func(c *Config) { c.SSH.StrictHostKeyChecking = "no" }, "ssh.strict_host_key_checking"},
		{"zero connect timeout", func(c *Config) { c.SSH.ConnectTimeout = 0 }, "ssh.connect_timeout"},
		{"empty known hosts", func(c *Config) { c.SSH.KnownHosts = "" }, "ssh.known_hosts"},
		{"singularity bind", func(c *Config) { c.Singularity.Binds = []string{"/a:/b:ro", "/c"} }, ""},
		{"singularity bad bind", func(c *Config) { c.Singularity.Binds = []string{"/a:b"} }, "singularity.binds"},
		{"modal timeout", func(c *Config) { c.Modal.Timeout = 25 * time.Hour }, "modal.timeout: must be at most 24h"},
		{"modal cpu", func(c *Config) { c.Modal.CPU = -1 }, "modal.cpu"},
		{"daytona both", func(c *Config) { c.Daytona.Image, c.Daytona.Snapshot = "a", "b" }, "both set"},
		{"daytona url", func(c *Config) { c.Daytona.APIURL = "app.daytona.io" }, "daytona.api_url"},
		{"daytona channel", func(c *Config) { c.Daytona.Channel = "sesion" }, `daytona.channel: invalid daytona channel "sesion": want one of auto, helper, session (did you mean "session"?)`},
		{"daytona channel ok", func(c *Config) { c.Daytona.Channel = DaytonaChannelSession }, ""},
		{"kubernetes root", func(c *Config) { c.Kubernetes.RunAsUser = 0 }, "kubernetes.run_as_user: must be a non-zero uid"},
		{"kubernetes namespace", func(c *Config) { c.Kubernetes.Namespace = "Team_A" }, `kubernetes.namespace: "Team_A" is not a namespace name`},
		{"kubernetes toleration", func(c *Config) { c.Kubernetes.Tolerations = []string{"gpu=yes:NoScheduel"} }, `effect "NoScheduel"`},
		{"kubernetes tolerations ok", func(c *Config) { c.Kubernetes.Tolerations = []string{"*", "gpu=yes:NoSchedule", "example.com/spot"} }, ""},
		{"kubernetes selector", func(c *Config) { c.Kubernetes.NodeSelector = map[string]string{"kubernetes.io/arch": "am d64"} }, "kubernetes.node_selector"},
		{"kubernetes lifetime", func(c *Config) { c.Kubernetes.MaxLifetime = 1500 * time.Millisecond }, "kubernetes.max_lifetime: must be at least 1m"},
		{"kubernetes mode", func(c *Config) { c.Kubernetes.Mode = "sandbox" }, "kubernetes.mode"},
		{"kubernetes pool", func(c *Config) { c.Kubernetes.PoolSize = 65 }, "kubernetes.pool_size"},
		{"vercel url ok", func(c *Config) { c.Vercel.APIURL = "https://api.vercel.com" }, ""},
		{"vercel timeout", func(c *Config) { c.Vercel.Timeout = 0 }, "vercel.timeout"},
		{"vercel no runtime", func(c *Config) { c.Vercel.Runtime = "" }, ""},
		{"vercel ports", func(c *Config) { c.Vercel.Ports = []string{"3000", "70000"} }, "vercel.ports"},
		{"vercel allow", func(c *Config) { c.Vercel.NetworkAllow = []string{"api.github.com", "http://x"} }, "vercel.network_allow"},
		{"approvals mode", func(c *Config) { c.Approvals.Mode = "ask" }, "approvals.mode"},
		{"approvals timeout", func(c *Config) { c.Approvals.Timeout = 0 }, "approvals.timeout"},
		{"loop", func(c *Config) { c.Loop.MaxToolCalls = -1 }, "loop.max_tool_calls"},
		{"audit level", func(c *Config) { c.Audit.Level = "debug" }, "audit.level"},
		{"audit destination", func(c *Config) { c.Audit.LogDestination = "" }, "audit.log_destination"},
		{"audit off no destination", func(c *Config) { c.Audit.LogDestination, c.Audit.Enabled = "", false }, ""},
		{"mcp listen", func(c *Config) { c.MCP.Listen = "8765" }, "mcp.listen"},
		{"mcp listen port", func(c *Config) { c.MCP.Listen = ":8765" }, ""},
	}
	for _, tt := range tests {
		c := NewConfig()
		tt.mutate(c)
		err := c.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v; want nil", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Validate() = %v; want error containing %q", tt.name, err, tt.want)
		case err != nil && !errors.Is(err, ErrInvalid):
			t.Errorf("%s: errors.Is(%v, ErrInvalid) = false", tt.name, err)
		}
	}
}

func TestValidateReportsAll(t *testing.T) {
	c := NewConfig()
	c.SSH.Port = 0
	c.Docker.CPUQuota = 0
	err := c.Validate()
	var e *Error
	if err == nil || !errors.As(err, &e) {
		t.Fatalf("Validate() = %v; want *Error", err)
	}
	for _, want := range []string{"ssh.port", "docker.cpu_quota"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to mention %s", err, want)
		}
	}
}
