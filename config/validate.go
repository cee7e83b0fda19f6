package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/rule"
)

// Minimums enforced by Validate.
const (
	MinDockerMemory = 6 * Mebibyte  // the engine refuses less
	MinDockerDisk   = 16 * Mebibyte // room for a file system and a little data
	MinOutputLimit  = 1000
	MinSpillLimit   = 64 * Kibibyte
	MaxModalTimeout = 24 * time.Hour
)

// Validate checks each value and the rules between values. It reports
// every problem at once, joined; each is an *Error naming the key.
func (c *Config) Validate() error { return joinErrors(c.validate()) }

type validator struct{ errs []*Error }

func (v *validator) failf(key, format string, args ...any) {
	v.errs = append(v.errs, &Error{Op: "validate config", Key: key, Err: fmt.Errorf(key+": "+format, args...)})
}

func (v *validator) positive(key string, d time.Duration) {
	if d <= 0 {
		v.failf(key, "must be greater than 0, got %s", FormatDuration(d))
	}
}

func (v *validator) nonNegative(key string, n int64) {
	if n < 0 {
		v.failf(key, "must not be negative, got %d", n)
	}
}

func (v *validator) nonNegativeDuration(key string, d time.Duration) {
	if d < 0 {
		v.failf(key, "must not be negative, got %s (use 0 to disable)", FormatDuration(d))
	}
}

func (v *validator) identifiers(key string, names []string) {
	for _, n := range names {
		if !isIdentifier(n) {
			v.failf(key, "%q is not a valid environment variable name (letters, digits and _, not starting with a digit)", n)
		}
	}
}

func (v *validator) nonEmptyItems(key string, items []string) {
	for _, it := range items {
		if strings.TrimSpace(it) == "" {
			v.failf(key, "empty entry")
		}
	}
}

func (v *validator) optionalAbs(key, p string) {
	if p != "" && p != "~" && !strings.HasPrefix(p, "~/") && !filepath.IsAbs(p) {
		v.failf(key, "%q must be an absolute path (or start with ~/)", p)
	}
}

func (v *validator) optionalURL(key, s string) {
	if s == "" {
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.failf(key, "%q is not an http(s) URL", s)
	}
}

func (c *Config) validate() []*Error {
	v := &validator{}
	c.validateTerminal(v)
	c.validateDocker(v)
	c.validateSSH(v)
	c.validateOthers(v)
	c.validateLocal(v)
	c.validateSecrets(v)
	return v.errs
}

// validateLocal checks local.network against local.confine (namespaces are part of the
// confinement), local.egress_allow against the network, and local.deny_read's paths.
func (c *Config) validateLocal(v *validator) {
	l := &c.Local
	if _, err := ParseLocalNetwork(string(l.Network)); err != nil {
		v.failf("local.network", "%v", err)
		return
	}
	if l.Confine == ConfineOff && l.Network != "" && l.Network != LocalNetworkHost {
		v.failf("local.network", "is %s but local.confine is off, and only a confined command gets a network namespace: set local.confine auto or strict", l.Network)
	}
	v.egressList("local.egress_allow", l.EgressAllow)
	if eff := l.EffectiveNetwork(c.Terminal.EgressAllow); len(l.EgressAllow) > 0 && eff != LocalNetworkAllowlist {
		v.failf("local.egress_allow", "is set but local.network is %s, so nothing would apply it: "+
			"set local.network allowlist (hermes-sandbox config set local.network allowlist) or empty local.egress_allow", eff)
	}
	for _, p := range l.DenyRead {
		if p != "~" && !strings.HasPrefix(p, "~/") && !filepath.IsAbs(p) {
			v.failf("local.deny_read", "%q is neither absolute nor under ~/", p)
		}
	}
	if l.BranchMaxBytes <= 0 {
		v.failf("local.branch_max_bytes", "is %d: give the most bytes a fork may copy where files cannot be cloned, e.g. 1g", l.BranchMaxBytes)
	}
}

func (c *Config) validateTerminal(v *validator) {
	t := &c.Terminal
	if !t.Backend.Valid() {
		_, err := ParseBackend(string(t.Backend))
		v.failf("terminal.backend", "%v", err)
	}
	v.positive("terminal.timeout", t.Timeout)
	if _, err := ParseShell(string(t.Shell)); err != nil {
		v.failf("terminal.shell", "%v", err)
	}
	if t.OutputLimit < MinOutputLimit {
		v.failf("terminal.output_limit", "must be at least %d, got %d", MinOutputLimit, t.OutputLimit)
	}
	v.positive("terminal.job_timeout", t.JobTimeout)
	if t.KeepAlive < 0 {
		v.failf("terminal.keep_alive", "must be 0 (no session owner) or a positive duration such as 10m, got %s", t.KeepAlive)
	}
	if t.SnapshotTTL < 0 {
		v.failf("terminal.snapshot_ttl", "must be 0 (keep snapshots until removed) or a positive duration such as 168h, got %s", t.SnapshotTTL)
	}
	if t.MaxJobs < 1 {
		v.failf("terminal.max_jobs", "must be at least 1, got %d", t.MaxJobs)
	}
	if t.SpillLimit < MinSpillLimit {
		v.failf("terminal.spill_limit", "must be at least %s, got %s", MinSpillLimit, t.SpillLimit)
	}
	v.identifiers("terminal.env_passthrough", t.EnvPassthrough)
	v.egressList("terminal.egress_allow", t.EgressAllow)
	v.optionalAbs("terminal.state_dir", t.StateDir)
}

func (c *Config) validateDocker(v *validator) {
	d := &c.Docker
	if strings.TrimSpace(d.Image) == "" {
		v.failf("docker.image", "must not be empty")
	}
	if d.MemoryLimit < MinDockerMemory {
		v.failf("docker.memory_limit", "must be at least %s, got %s", MinDockerMemory, d.MemoryLimit)
	}
	if d.CPUQuota <= 0 {
		v.failf("docker.cpu_quota", "must be greater than 0, got %s", formatFloat(d.CPUQuota))
	}
	v.nonNegative("docker.pids_limit", d.PidsLimit)
	if d.DiskLimit != 0 && d.DiskLimit < MinDockerDisk {
		v.failf("docker.disk_limit", "must be 0 (unlimited) or at least %s, got %s", MinDockerDisk, d.DiskLimit)
	}
	v.nonEmptyItems("docker.security_opt", d.SecurityOpt)
	if d.Cwd != "" && !strings.HasPrefix(d.Cwd, "/") {
		v.failf("docker.cwd", "%q must be an absolute path inside the container", d.Cwd)
	}
	for _, vol := range d.Volumes {
		if err := checkVolume(vol); err != nil {
			v.failf("docker.volumes", "%v", err)
		}
	}
	for k := range d.Env {
		if !isIdentifier(k) {
			v.failf("docker.env", "%q is not a valid environment variable name", k)
		}
	}
	v.identifiers("docker.env_passthrough", d.EnvPassthrough)
	c.validateDockerNetwork(v)
	for _, h := range d.ExtraHosts {
		name, addr, ok := strings.Cut(h, ":")
		if !ok || name == "" || (addr != "host-gateway" && net.ParseIP(addr) == nil) {
			v.failf("docker.extra_hosts", "%q: want NAME:IP or NAME:host-gateway", h)
		}
	}
	v.nonNegativeDuration("docker.idle_timeout", d.IdleTimeout)
	v.nonNegative("docker.pool_size", int64(d.PoolSize))
	if d.Host != "" {
		scheme, _, ok := strings.Cut(d.Host, "://")
		if !ok || !slices.Contains([]string{"unix", "tcp", "ssh", "npipe", "http", "https"}, scheme) {
			v.failf("docker.host", "%q: want unix://PATH, tcp://HOST:PORT or ssh://USER@HOST", d.Host)
		}
	}
}

// validateDockerNetwork checks docker.network against network_enabled (the seed's spelling)
// and that an allowlist is not set where nothing would apply it.
func (c *Config) validateDockerNetwork(v *validator) {
	d := &c.Docker
	c.validateNetwork(v, "docker", d.Network, d.NetworkEnabled, d.EgressAllow)
}

// validateNetwork checks SECTION.network against SECTION.network_enabled (its old spelling)
// and that SECTION.egress_allow is not set where nothing would apply it.
func (c *Config) validateNetwork(v *validator, section string, mode NetworkMode, enabled bool, allow []string) {
	key, oldKey, allowKey := section+".network", section+".network_enabled", section+".egress_allow"
	if _, err := ParseNetworkMode(string(mode)); err != nil {
		v.failf(key, "%v", err)
		return
	}
	if mode != "" && c.Source(oldKey) != SourceDefault && mode != effectiveNetwork("", enabled) {
		v.failf(key, "%s contradicts %s: %v (false means none, true means open); %s replaces it: unset one (hermes-sandbox config unset %s)",
			mode, oldKey, enabled, key, oldKey)
	}
	v.egressList(allowKey, allow)
	if eff := effectiveNetwork(mode, enabled); len(allow) > 0 && eff != NetworkAllowlist {
		v.failf(allowKey, "is set but %s is %s, so nothing would apply it: set %s allowlist (hermes-sandbox config set %s allowlist) or empty %s",
			key, eff, key, key, allowKey)
	}
}

// egressList checks each egress allowlist entry: NAME, *.NAME, NAME:PORT; no IP addresses.
func (v *validator) egressList(key string, entries []string) {
	for _, e := range entries {
		if _, err := rule.Parse(e); err != nil {
			v.failf(key, "%v (entries are host names: pypi.org, *.github.com, host:port)", err)
		}
	}
}

// checkVolume checks a docker volume spec host:container[:ro|rw]. The host
// side is an absolute path, a ~/ path or a named volume.
func checkVolume(spec string) error {
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return fmt.Errorf("%q: want HOST:CONTAINER or HOST:CONTAINER:ro|rw", spec)
	}
	host, ctr := parts[0], parts[1]
	switch {
	case host == "":
		return fmt.Errorf("%q: empty host path", spec)
	case strings.HasPrefix(host, "/") || host == "~" || strings.HasPrefix(host, "~/"):
	case strings.HasPrefix(host, "."):
		return fmt.Errorf("%q: host path must be absolute (or start with ~/)", spec)
	case !isVolumeName(host):
		return fmt.Errorf("%q: host side must be an absolute path or a volume name", spec)
	}
	if !strings.HasPrefix(ctr, "/") {
		return fmt.Errorf("%q: container path %q must be absolute", spec, ctr)
	}
	if len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw" {
		return fmt.Errorf("%q: mode %q must be ro or rw", spec, parts[2])
	}
	return nil
}

func isVolumeName(s string) bool {
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || (r != '_' && r != '.' && r != '-')) {
			return false
		}
	}
	return s != ""
}

func isIdentifier(s string) bool {
	for i, r := range s {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return s != ""
}

func (c *Config) validateSSH(v *validator) {
	s := &c.SSH
	if s.Port < 1 || s.Port > 65535 {
		v.failf("ssh.port", "must be between 1 and 65535, got %d", s.Port)
	}
	if !s.StrictHostKeyChecking.Valid() {
		_, err := ParseHostKeyPolicy(string(s.StrictHostKeyChecking))
		v.failf("ssh.strict_host_key_checking", "%v", err)
	}
	v.positive("ssh.connect_timeout", s.ConnectTimeout)
	v.nonNegativeDuration("ssh.keepalive", s.Keepalive)
	if s.KnownHosts == "" {
		v.failf("ssh.known_hosts", "must not be empty: host keys are always checked")
	}
	if strings.ContainsAny(s.Host, " \t/") {
		v.failf("ssh.host", "%q is not a host name", s.Host)
	}
}

func (c *Config) validateOthers(v *validator) {
	if c.MCP.MaxSessions < 1 {
		v.failf("mcp.max_sessions", "must be at least 1, got %d", c.MCP.MaxSessions)
	}
	v.positive("mcp.session_idle_timeout", c.MCP.SessionIdleTimeout)
	v.positive("mcp.drain_timeout", c.MCP.DrainTimeout)
	if (c.MCP.TLSCert == "") != (c.MCP.TLSKey == "") {
		v.failf("mcp.tls_cert", "mcp.tls_cert and mcp.tls_key go together: set both (PEM certificate and its key) or neither")
	}
	sg := &c.Singularity
	v.optionalAbs("singularity.cwd", sg.Cwd)
	for _, b := range sg.Binds {
		src, rest, _ := strings.Cut(b, ":")
		dst, mode, hasMode := strings.Cut(rest, ":")
		switch {
		case src == "":
			v.failf("singularity.binds", "%q: want SRC[:DST[:ro|rw]]", b)
		case dst != "" && !strings.HasPrefix(dst, "/"):
			v.failf("singularity.binds", "%q: destination %q must be absolute", b, dst)
		case hasMode && mode != "ro" && mode != "rw":
			v.failf("singularity.binds", "%q: mode %q must be ro or rw", b, mode)
		}
	}

	m := &c.Modal
	if strings.TrimSpace(m.Image) == "" {
		v.failf("modal.image", "must not be empty")
	}
	if strings.TrimSpace(m.App) == "" {
		v.failf("modal.app", "must not be empty")
	}
	if m.CPU < 0 {
		v.failf("modal.cpu", "must not be negative, got %s", formatFloat(m.CPU))
	}
	v.nonNegative("modal.memory", int64(m.MemoryMiB))
	v.positive("modal.timeout", m.Timeout)
	if m.Timeout > MaxModalTimeout {
		v.failf("modal.timeout", "must be at most %s, got %s", FormatDuration(MaxModalTimeout), FormatDuration(m.Timeout))
	}
	v.positive("modal.idle_timeout", m.IdleTimeout)
	for name, d := range map[string]time.Duration{"modal.timeout": m.Timeout, "modal.idle_timeout": m.IdleTimeout} {
		if d%time.Second != 0 {
			v.failf(name, "Modal counts whole seconds, got %s", FormatDuration(d))
		}
	}
	for _, c := range m.CIDRAllowlist {
		if _, _, err := net.ParseCIDR(c); err != nil {
			v.failf("modal.cidr_allowlist", "%q is not a CIDR such as 10.0.0.0/8", c)
		}
	}
	if len(m.CIDRAllowlist) > 0 && m.BlockNetwork {
		v.failf("modal.cidr_allowlist", "needs modal.block_network: false (hermes-sandbox config set modal.block_network false)")
	}
	v.optionalURL("modal.server_url", m.ServerURL)

	d := &c.Daytona
	if d.Image != "" && d.Snapshot != "" {
		v.failf("daytona.snapshot", "daytona.image and daytona.snapshot are both set; keep one (hermes-sandbox config unset daytona.image)")
	}
	if d.AutoStop < time.Minute {
		v.failf("daytona.auto_stop", "must be at least 1m (an idle sandbox that never stops runs, and costs, forever), got %s", FormatDuration(d.AutoStop))
	}
	v.nonNegativeDuration("daytona.auto_archive", d.AutoArchive)
	v.nonNegativeDuration("daytona.auto_delete", d.AutoDelete)
	v.nonNegative("daytona.disk", int64(d.DiskGiB))
	v.nonEmptyItems("daytona.network_allow_list", d.NetworkAllowList)
	v.optionalURL("daytona.api_url", d.APIURL)
	v.nonNegative("daytona.cpu", int64(d.CPU))
	v.nonNegative("daytona.memory", int64(d.MemoryGiB))
	if !d.Channel.Valid() {
		_, err := ParseDaytonaChannel(string(d.Channel))
		v.failf("daytona.channel", "%v", err)
	}

	v.kubernetes(&c.Kubernetes)
	c.validateNetwork(v, "kubernetes", c.Kubernetes.Network, c.Kubernetes.NetworkEnabled, c.Kubernetes.EgressAllow)

	vc := &c.Vercel
	if vc.Runtime != strings.TrimSpace(vc.Runtime) {
		v.failf("vercel.runtime", "must not have surrounding spaces (empty = the image's default)")
	}
	for _, p := range vc.Ports {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			v.failf("vercel.ports", "%q is not a port number between 1 and 65535", p)
		}
	}
	for _, d := range vc.NetworkAllow {
		if d == "" || strings.ContainsAny(d, " /:") {
			v.failf("vercel.network_allow", "%q is not a domain name (for example api.github.com or *.npmjs.org)", d)
		}
	}
	v.nonNegative("vercel.vcpus", int64(vc.VCPUs))
	v.positive("vercel.timeout", vc.Timeout)
	v.optionalURL("vercel.api_url", vc.APIURL)

	a := &c.Approvals
	if !a.Mode.Valid() {
		_, err := ParseApprovalMode(string(a.Mode))
		v.failf("approvals.mode", "%v", err)
	}
	v.positive("approvals.timeout", a.Timeout)
	v.nonEmptyItems("approvals.command_allowlist", a.CommandAllowlist)

	v.nonNegative("loop.max_tool_calls", int64(c.Loop.MaxToolCalls))

	au := &c.Audit
	if !au.Level.Valid() {
		_, err := ParseAuditLevel(string(au.Level))
		v.failf("audit.level", "%v", err)
	}
	if au.Enabled && au.Level != AuditOff && strings.TrimSpace(au.LogDestination) == "" {
		v.failf("audit.log_destination", "must not be empty while audit is enabled")
	}
	if !au.OnFailure.Valid() {
		_, err := ParseAuditOnFailure(string(au.OnFailure))
		v.failf("audit.on_failure", "%v", err)
	}
	if !au.Witness.Valid() {
		_, err := ParseAuditWitness(string(au.Witness))
		v.failf("audit.witness", "%v", err)
	}
	if au.WitnessSocket != "" && !filepath.IsAbs(au.WitnessSocket) {
		v.failf("audit.witness_socket", "%q: want an absolute path to a unix datagram socket", au.WitnessSocket)
	}

	_, port, err := net.SplitHostPort(c.MCP.Listen)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		v.failf("mcp.listen", "%q: want HOST:PORT, e.g. 127.0.0.1:8765", c.MCP.Listen)
	}
}
