package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustLoad(t *testing.T, p string) *Config {
	t.Helper()
	c, err := LoadWith(Options{Path: p})
	if err != nil {
		t.Fatalf("LoadWith(%q) = %v", p, err)
	}
	return c
}

func TestSetGetRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "new", "dir", "config.yaml")
	tests := []struct{ key, value, want string }{
		{"docker.memory_limit", "1g", "1g"},
		{"terminal.spill_limit", "1MiB", "1m"},
		{"terminal.max_jobs", "4", "4"},
		{"terminal.snapshot_ttl", "0", "0s"},
		{"mcp.max_sessions", "8", "8"},
		{"mcp.session_idle_timeout", "5m", "5m"},
		{"terminal.job_timeout", "90s", "1m30s"},
		{"docker.memory_limit", "1536MiB", "1536m"},
		{"terminal.backend", "Docker", "docker"},
		{"sandbox", "ssh", "ssh"},
		{"terminal.timeout", "90s", "1m30s"},
		{"docker.network_enabled", "true", "true"},
		{"docker.cpu_quota", "2", "2.0"},
		{"docker.pids_limit", "0", "0"},
		{"docker.disk_limit", "20GiB", "20g"},
		{"docker.disk_limit", "0", "0"},
		{"docker.security_opt", "no-new-privileges:true,seccomp=unconfined", "no-new-privileges:true,seccomp=unconfined"},
		{"docker.volumes", "[/a:/a:ro, /b:/b]", "/a:/a:ro,/b:/b"},
		{"docker.volumes", "", ""},
		{"docker.env", "A=1,B=x y", "A=1,B=x y"},
		{"docker.env", "{C: 'a,b'}", "{C: 'a,b'}"},
		{"docker.user", "1000", "1000"},
		{"ssh.cwd", "~", "~"},
		{"ssh.host", "true", "true"},
		{"audit.level", "off", "off"},
		{"approvals.command_allowlist", "ls,git status", "ls,git status"},
	}
	for _, tt := range tests {
		if err := Set(p, tt.key, tt.value); err != nil {
			t.Fatalf("Set(%q, %q) = %v", tt.key, tt.value, err)
		}
		c := mustLoad(t, p)
		if got, err := Get(c, tt.key); err != nil || got != tt.want {
			t.Errorf("Get(%q) after Set(%q) = %q, %v; want %q", tt.key, tt.value, got, err, tt.want)
		}
		// The printed value is itself accepted by Set and round-trips.
		if err := Set(p, tt.key, tt.want); err != nil {
			t.Errorf("Set(%q, %q) with Get's output = %v", tt.key, tt.want, err)
		}
		if got, _ := Get(mustLoad(t, p), tt.key); got != tt.want {
			t.Errorf("Get(%q) after re-Set = %q; want %q", tt.key, got, tt.want)
		}
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("config file mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
	if st, err := os.Stat(filepath.Dir(p)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("created directory mode = %v, %v; want 0700", st.Mode().Perm(), err)
	}
	if _, err := os.Stat(SecretsPathFor(p)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("secrets file exists after setting only plain keys: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries; want only config.yaml (no temp files left)", len(entries))
	}
}

const commented = `# Top comment stays.
terminal:
  # Which backend to use.
  backend: local # inline comment
  timeout: 60s

# Docker settings.
docker: {image: alpine:3, cpu_quota: 2} # flow style
ssh:
  host: box # my server
`

func TestSetPreservesComments(t *testing.T) {
	p := writeFile(t, "config.yaml", commented, 0o644)
	steps := []struct{ key, value string }{
		{"terminal.backend", "docker"},
		{"docker.memory_limit", "1g"},
		{"vercel.runtime", "node22"},
		{"ssh.port", "2222"},
	}
	for _, s := range steps {
		if err := Set(p, s.key, s.value); err != nil {
			t.Fatalf("Set(%q, %q) = %v", s.key, s.value, err)
		}
	}
	got := readString(t, p)
	for _, want := range []string{
		"# Top comment stays.", "# Which backend to use.", "backend: docker # inline comment",
		"timeout: 60s", "# Docker settings.", "alpine:3", "memory_limit: 1g", "# flow style",
		"host: box # my server", "port: 2222", "vercel:", "runtime: node22",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("file after Set lacks %q:\n%s", want, got)
		}
	}
	c := mustLoad(t, p)
	if c.Terminal.Backend != BackendDocker || c.Docker.MemoryLimit != Gibibyte || c.Docker.Image != "alpine:3" ||
		c.SSH.Port != 2222 || c.Vercel.Runtime != "node22" || c.Terminal.Timeout.String() != "1m0s" {
		t.Errorf("loaded after Set = %+v", c.Terminal)
	}

	if err := Unset(p, "terminal.backend"); err != nil {
		t.Fatalf("Unset(terminal.backend) = %v", err)
	}
	if err := Unset(p, "vercel.runtime"); err != nil {
		t.Fatalf("Unset(vercel.runtime) = %v", err)
	}
	got = readString(t, p)
	if strings.Contains(got, "backend:") || strings.Contains(got, "vercel") {
		t.Errorf("file after Unset still holds the keys:\n%s", got)
	}
	if !strings.Contains(got, "# Top comment stays.") || !strings.Contains(got, "host: box # my server") {
		t.Errorf("Unset lost comments:\n%s", got)
	}
	c = mustLoad(t, p)
	if c.Terminal.Backend != BackendAuto || c.Vercel.Runtime != "python3.13" {
		t.Errorf("after Unset: backend %q, runtime %q; want the defaults", c.Terminal.Backend, c.Vercel.Runtime)
	}
	before := readString(t, p)
	if err := Unset(p, "docker.gpus"); err != nil {
		t.Errorf("Unset(absent key) = %v; want nil", err)
	}
	if after := readString(t, p); after != before {
		t.Errorf("Unset(absent key) changed the file")
	}
}

func TestSetAliasEditsExistingAliasKey(t *testing.T) {
	p := writeFile(t, "config.yaml", "sandbox: local # chosen backend\n", 0o600)
	if err := Set(p, "terminal.backend", "docker"); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, p); !strings.Contains(got, "sandbox: docker # chosen backend") || strings.Contains(got, "terminal") {
		t.Errorf("file = %q; want the sandbox key updated in place", got)
	}
	if err := Unset(p, "sandbox"); err != nil {
		t.Fatal(err)
	}
	if c := mustLoad(t, p); c.Terminal.Backend != BackendAuto {
		t.Errorf("backend after Unset(sandbox) = %q; want auto", c.Terminal.Backend)
	}
}

func TestSetSecrets(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte("docker:\n  image: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := readString(t, p)
	for _, kv := range [][2]string{
		{"modal.token_id", "ak-123"}, {"modal.token_secret", "as-456"}, {"daytona.api_key", "dk"},
		{"vercel.token", "vt"}, {"ssh.password", "pw: with colon"}, {"ssh.key_passphrase", "pp"},
	} {
		if !IsSecretKey(kv[0]) {
			t.Errorf("IsSecretKey(%q) = false; want true", kv[0])
		}
		if err := Set(p, kv[0], kv[1]); err != nil {
			t.Fatalf("Set(%q) = %v", kv[0], err)
		}
	}
	if after := readString(t, p); after != before {
		t.Errorf("config.yaml changed by secret Set:\n%s", after)
	}
	sec := filepath.Join(dir, "secrets.yaml")
	st, err := os.Stat(sec)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secrets.yaml mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
	c := mustLoad(t, p)
	if c.Modal.TokenID.Reveal() != "ak-123" || c.SSH.Password.Reveal() != "pw: with colon" {
		t.Errorf("secrets loaded = %q, %q", c.Modal.TokenID.Reveal(), c.SSH.Password.Reveal())
	}
	for _, kv := range List(c) {
		if kv.Secret && kv.Value != "***" && kv.Value != "" {
			t.Errorf("List() shows %s = %q; want masked", kv.Key, kv.Value)
		}
		if strings.Contains(kv.Value, "ak-123") {
			t.Errorf("List() leaks a secret in %s", kv.Key)
		}
	}
	if err := Unset(p, "modal.token_id"); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, sec); strings.Contains(got, "ak-123") || !strings.Contains(got, "as-456") {
		t.Errorf("secrets.yaml after Unset(modal.token_id):\n%s", got)
	}

	// A secrets file others can read is refused, for writing too.
	if err := os.Chmod(sec, 0o644); err != nil {
		t.Fatal(err)
	}
	err = Set(p, "vercel.token", "new")
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+sec) {
		t.Errorf("Set with a 0644 secrets file = %v; want a chmod 600 error", err)
	}
	if got := readString(t, sec); strings.Contains(got, "new") {
		t.Errorf("Set wrote to a 0644 secrets file")
	}
}

func TestSetRejectsBeforeWriting(t *testing.T) {
	tests := []struct{ key, value, want string }{
		{"docker.memory_limit", "lots", `set config: docker.memory_limit: invalid size "lots"`},
		{"docker.memory_limit", "1m", `set config: docker.memory_limit: must be at least 6m, got 1m`},
		{"docker.cpu_quota", "0", "docker.cpu_quota: must be greater than 0"},
		{"terminal.timeout", "30", `invalid duration "30": add a unit, e.g. 30s`},
		{"terminal.backend", "dockr", `did you mean "docker"`},
		{"sandbox", "nope", `invalid backend "nope"`},
		{"ssh.port", "70000", "ssh.port: must be between 1 and 65535"},
		{"ssh.strict_host_key_checking", "no", "use accept-new"},
		{"docker.volumes", "data:/data,/x:rel", `container path "rel" must be absolute`},
		{"docker.volumes", "./d:/d", "host path must be absolute"},
		{"docker.env", "A", `invalid map entry "A": want KEY=VALUE`},
		{"docker.env", "1A=x", "not a valid environment variable name"},
		{"terminal.env_passthrough", "PATH,BAD-NAME", `"BAD-NAME" is not a valid environment variable name`},
		{"terminal.output_limit", "10", "must be at least 1000"},
		{"terminal.spill_limit", "1k", "terminal.spill_limit: must be at least 64k"},
		{"terminal.spil_limit", "1m", `did you mean "terminal.spill_limit"?`},
		{"terminal.max_jobs", "0", "terminal.max_jobs: must be at least 1"},
		{"terminal.snapshot_ttl", "-1h", "terminal.snapshot_ttl: must be 0"},
		{"terminal.job_timeout", "0s", "terminal.job_timeout: must be greater than 0"},
		{"terminal.max_job", "4", `did you mean "terminal.max_jobs"?`},
		{"mcp.max_sessions", "0", "mcp.max_sessions: must be at least 1"},
		{"mcp.session_idle_timeout", "0s", "mcp.session_idle_timeout: must be greater than 0"},
		{"mcp.max_session", "8", `did you mean "mcp.max_sessions"?`},
		{"docker.netwrk_enabled", "true", `unknown key "docker.netwrk_enabled" (did you mean "docker.network_enabled"?)`},
		{"backend", "docker", `did you mean "terminal.backend"?`},
		{"dockr.image", "x", `did you mean "docker.image"?`},
		{"docker.network_enabled", "maybe", `invalid bool "maybe"`},
	}
	for _, tt := range tests {
		p := writeFile(t, "config.yaml", commented, 0o644)
		err := Set(p, tt.key, tt.value)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Set(%q, %q) = %v; want error containing %q", tt.key, tt.value, err, tt.want)
		}
		if got := readString(t, p); got != commented {
			t.Errorf("Set(%q, %q) changed the file despite the error:\n%s", tt.key, tt.value, got)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
			t.Errorf("Set(%q, %q) rewrote the file (mode %v) despite the error", tt.key, tt.value, st.Mode().Perm())
		}
	}
}

// TestSetNetworkModes: docker.network replaces network_enabled; both set inconsistently is an
// error naming the key to unset, and the allowlist round-trips through config set.
func TestSetNetworkModes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := Set(p, "docker.network_enabled", "false"); err != nil {
		t.Fatal(err)
	}
	err := Set(p, "docker.network", "allowlist")
	if err == nil || !strings.Contains(err.Error(), "contradicts docker.network_enabled") || !strings.Contains(err.Error(), "config unset docker.network_enabled") {
		t.Errorf("Set(docker.network allowlist) with network_enabled false = %v; want a contradiction error naming the fix", err)
	}
	if err := Unset(p, "docker.network_enabled"); err != nil {
		t.Fatal(err)
	}
	if err := Set(p, "docker.network", "allowlist"); err != nil {
		t.Fatalf("Set(docker.network allowlist) = %v", err)
	}
	if err := Set(p, "docker.egress_allow", "[pypi.org, \"*.github.com\", git.example.com:22]"); err != nil {
		t.Fatalf("Set(docker.egress_allow) = %v", err)
	}
	c, err := LoadWith(Options{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	if c.Docker.EffectiveNetwork() != NetworkAllowlist || !reflect.DeepEqual(c.Docker.EgressAllow, []string{"pypi.org", "*.github.com", "git.example.com:22"}) {
		t.Errorf("after Set: network %q allow %q", c.Docker.EffectiveNetwork(), c.Docker.EgressAllow)
	}
	if err := Set(p, "docker.egress_allow", "[1.2.3.4]"); err == nil || !strings.Contains(err.Error(), "IP address") {
		t.Errorf("Set(docker.egress_allow [1.2.3.4]) = %v; want an IP-address error", err)
	}
	if err := Set(p, "docker.network", "open"); err == nil || !strings.Contains(err.Error(), "docker.egress_allow") {
		t.Errorf("Set(docker.network open) with an allowlist = %v; want an error naming docker.egress_allow", err)
	}
	for _, tt := range []struct {
		enabled bool
		want    NetworkMode
	}{{false, NetworkNone}, {true, NetworkOpen}} {
		if got := (DockerConfig{NetworkEnabled: tt.enabled}).EffectiveNetwork(); got != tt.want {
			t.Errorf("EffectiveNetwork(network_enabled %v) = %q; want %q", tt.enabled, got, tt.want)
		}
	}
}

// TestSetKubernetesNetwork: kubernetes.network replaces kubernetes.network_enabled the way
// docker.network does, with errors naming the kubernetes keys, and its allowlist round-trips.
func TestSetKubernetesNetwork(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := Set(p, "kubernetes.network", "filtered"); err == nil || !strings.Contains(err.Error(), `kubernetes.network: invalid network mode "filtered"`) {
		t.Errorf("Set(kubernetes.network filtered) = %v; want an error naming kubernetes.network", err)
	}
	if err := Set(p, "kubernetes.network_enabled", "true"); err != nil {
		t.Fatal(err)
	}
	err := Set(p, "kubernetes.network", "allowlist")
	if err == nil || !strings.Contains(err.Error(), "contradicts kubernetes.network_enabled") || !strings.Contains(err.Error(), "config unset kubernetes.network_enabled") {
		t.Errorf("Set(kubernetes.network allowlist) with network_enabled true = %v; want a contradiction error naming the fix", err)
	}
	if err := Unset(p, "kubernetes.network_enabled"); err != nil {
		t.Fatal(err)
	}
	if err := Set(p, "kubernetes.egress_allow", "[pypi.org]"); err == nil || !strings.Contains(err.Error(), "kubernetes.network is none") {
		t.Errorf("Set(kubernetes.egress_allow) with network none = %v; want an error naming kubernetes.network", err)
	}
	if err := Set(p, "kubernetes.network", "allowlist"); err != nil {
		t.Fatalf("Set(kubernetes.network allowlist) = %v", err)
	}
	if err := Set(p, "kubernetes.egress_allow", "[pypi.org, \"*.github.com\"]"); err != nil {
		t.Fatalf("Set(kubernetes.egress_allow) = %v", err)
	}
	c, err := LoadWith(Options{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	if c.Kubernetes.EffectiveNetwork() != NetworkAllowlist || !reflect.DeepEqual(c.Kubernetes.EgressAllow, []string{"pypi.org", "*.github.com"}) {
		t.Errorf("after Set: network %q allow %q", c.Kubernetes.EffectiveNetwork(), c.Kubernetes.EgressAllow)
	}
	if c.Docker.EffectiveNetwork() != NetworkNone {
		t.Errorf("kubernetes.network changed docker's: %q", c.Docker.EffectiveNetwork())
	}
	for _, tt := range []struct {
		enabled bool
		want    NetworkMode
	}{{false, NetworkNone}, {true, NetworkOpen}} {
		if got := (KubernetesConfig{NetworkEnabled: tt.enabled}).EffectiveNetwork(); got != tt.want {
			t.Errorf("KubernetesConfig{NetworkEnabled: %v}.EffectiveNetwork() = %q; want %q", tt.enabled, got, tt.want)
		}
	}
}

func TestSetCrossFieldRule(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := Set(p, "daytona.image", "ubuntu"); err != nil {
		t.Fatal(err)
	}
	err := Set(p, "daytona.snapshot", "snap")
	if err == nil || !strings.Contains(err.Error(), "both set") {
		t.Errorf("Set(daytona.snapshot) with daytona.image set = %v; want a both-set error", err)
	}
	if err := Unset(p, "daytona.image"); err != nil {
		t.Fatal(err)
	}
	if err := Set(p, "daytona.snapshot", "snap"); err != nil {
		t.Errorf("Set(daytona.snapshot) after Unset(daytona.image) = %v", err)
	}
}

func TestSetRefusesBrokenFile(t *testing.T) {
	broken := "docker:\n  netwrk_enabled: true\n"
	p := writeFile(t, "config.yaml", broken, 0o600)
	err := Set(p, "docker.image", "x")
	if err == nil || !strings.Contains(err.Error(), `config.yaml:2: unknown key "netwrk_enabled"`) {
		t.Errorf("Set on a file with an unknown key = %v; want the load error", err)
	}
	if got := readString(t, p); got != broken {
		t.Errorf("file changed: %q", got)
	}
}

func TestSetFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.yaml")
	if err := os.WriteFile(real, []byte("ssh:\n  host: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "config.yaml")
	if err := os.Symlink(real, link); err != nil {
		t.Skipf("symlinks unsupported: %v", err)
	}
	if err := Set(link, "ssh.host", "b"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("Set replaced the symlink with a file")
	}
	if got := readString(t, real); !strings.Contains(got, "host: b") {
		t.Errorf("target after Set = %q; want host: b", got)
	}
}

func TestKeysAndList(t *testing.T) {
	keys := Keys()
	if !slices.IsSorted(keys) {
		t.Errorf("Keys() is not sorted")
	}
	for _, k := range []string{"terminal.backend", "docker.memory_limit", "ssh.strict_host_key_checking",
		"modal.token_id", "mcp.listen", "audit.log_destination", "vercel.token"} {
		if !slices.Contains(keys, k) {
			t.Errorf("Keys() lacks %q", k)
		}
	}
	c := NewConfig()
	list := List(c)
	if len(list) != len(keys) {
		t.Fatalf("len(List()) = %d; want %d", len(list), len(keys))
	}
	for i, kv := range list {
		if kv.Key != keys[i] {
			t.Errorf("List()[%d].Key = %q; want %q", i, kv.Key, keys[i])
		}
		if kv.Source != SourceDefault {
			t.Errorf("List()[%d].Source = %q; want default", i, kv.Source)
		}
	}
	tests := []struct {
		key    string
		secret bool
	}{
		{"modal.token_id", true}, {"modal.token_secret", true}, {"daytona.api_key", true},
		{"vercel.token", true}, {"ssh.password", true}, {"ssh.key_passphrase", true},
		{"ssh.key", false}, {"sandbox", false}, {"nope.nope", false},
	}
	for _, tt := range tests {
		if got := IsSecretKey(tt.key); got != tt.secret {
			t.Errorf("IsSecretKey(%q) = %v; want %v", tt.key, got, tt.secret)
		}
	}
	if got := EnvName("docker.memory_limit"); got != "HERMES_SANDBOX_DOCKER_MEMORY_LIMIT" {
		t.Errorf("EnvName(docker.memory_limit) = %q", got)
	}
	if _, err := Get(c, "docker.memry_limit"); err == nil || !strings.Contains(err.Error(), `did you mean "docker.memory_limit"?`) {
		t.Errorf("Get(docker.memry_limit) = %v; want a suggestion", err)
	}
}

func TestSetValueFlagOverride(t *testing.T) {
	c := NewConfig()
	if err := c.SetValue("sandbox", "docker"); err != nil {
		t.Fatal(err)
	}
	if c.Terminal.Backend != BackendDocker || c.Source("terminal.backend") != SourceFlag {
		t.Errorf("SetValue(sandbox, docker): backend %q source %q", c.Terminal.Backend, c.Source("terminal.backend"))
	}
	if err := c.SetValue("docker.memory_limit", "huge"); err == nil {
		t.Errorf("SetValue(docker.memory_limit, huge) = nil; want error")
	}
	if err := c.SetValue("docker.memory_limit", "1m"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "docker.memory_limit") {
		t.Errorf("Validate() after SetValue(1m) = %v; want a memory_limit error", err)
	}
}
