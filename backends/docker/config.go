package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Paths inside every container.
const (
	agentDir    = "/.hermes"
	agentInCtr  = agentDir + "/sandbox-agent"
	helperState = "/tmp/.hermes/state"
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	tmpMax      = 256 << 20 // /tmp tmpfs size when the memory limit allows
)

// minMemory is the least memory a sandbox gets. The container's init, idle entrypoint and
// helper already take about 6 MiB (measured with the small sandbox-agent binary, the engine's
// own minimum), which would leave nothing for commands: the OOM killer would take the helper
// with the first one. Limits below 16 MiB are refused before anything is created.
const minMemory = 16 * config.Mebibyte

// Labels on everything the backend creates.
const (
	labelOurs    = "hermes-sandbox"         // "1"
	labelScope   = "hermes-sandbox.scope"   // hash of the state directory
	labelSession = "hermes-sandbox.session" // session name (absent on pool containers)
	labelPool    = "hermes-sandbox.pool"    // owner of a warm-pool container
	labelCreated = "hermes-sandbox.created" // RFC 3339
	labelSpec    = "hermes-sandbox.spec"    // hash of the container settings
	// labelSettings is name=hash per setting (see settingParts): which settings differ.
	labelSettings = "hermes-sandbox.settings"
	labelRole     = "hermes-sandbox.role" // "session", "pool" or "prep"
	// labelOwner is host/pid/start of the process whose session this is, set when that
	// process removes its sessions when done (FactoryOptions.Ephemeral): gc removes the
	// container once that process is gone.
	labelOwner = "hermes-sandbox.owner"
)

// endpoint is where the engine listens and how to talk to it.
type endpoint struct {
	Host    string
	TLSCA   string
	TLSCert string
	TLSKey  string
	source  string // for messages: "docker.host", "DOCKER_HOST", "context NAME", "default"
}

// resolveEndpoint finds the engine: docker.host, else DOCKER_HOST, else the docker context
// (DOCKER_CONTEXT, else currentContext in ~/.docker/config.json), else the default socket.
func resolveEndpoint(cfgHost string, opts sandbox.FactoryOptions) (endpoint, error) {
	if cfgHost != "" {
		return endpoint{Host: cfgHost, source: "docker.host"}, nil
	}
	if h, _ := opts.Getenv("DOCKER_HOST"); h != "" {
		ep := endpoint{Host: h, source: "DOCKER_HOST"}
		if v, _ := opts.Getenv("DOCKER_TLS_VERIFY"); v != "" && v != "0" {
			dir, _ := opts.Getenv("DOCKER_CERT_PATH")
			if dir == "" {
				dir = filepath.Join(dockerConfigDir(opts), "")
			}
			ep.TLSCA, ep.TLSCert, ep.TLSKey = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		}
		return ep, nil
	}
	name, _ := opts.Getenv("DOCKER_CONTEXT")
	dir := dockerConfigDir(opts)
	if name == "" {
		var cf struct {
			CurrentContext string `json:"currentContext"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil {
			if err := json.Unmarshal(b, &cf); err != nil {
				return endpoint{}, fmt.Errorf("docker: read %s: %v: %w", filepath.Join(dir, "config.json"), err, sandbox.ErrInvalidConfig)
			}
			name = cf.CurrentContext
		}
	}
	if name == "" || name == "default" {
		return endpoint{Host: defaultHost, source: "default"}, nil
	}
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:])
	metaPath := filepath.Join(dir, "contexts", "meta", id, "meta.json")
	b, err := os.ReadFile(metaPath)
	if err != nil {
		return endpoint{}, fmt.Errorf("docker: context %q: %v (list contexts with `docker context ls`, or set docker.host): %w", name, err, sandbox.ErrInvalidConfig)
	}
	var meta struct {
		Endpoints map[string]struct {
			Host          string `json:"Host"`
			SkipTLSVerify bool   `json:"SkipTLSVerify"`
		} `json:"Endpoints"`
	}
	if err := json.Unmarshal(b, &meta); err != nil || meta.Endpoints["docker"].Host == "" {
		return endpoint{}, fmt.Errorf("docker: context %q: %s has no docker endpoint: %w", name, metaPath, sandbox.ErrInvalidConfig)
	}
	ep := endpoint{Host: meta.Endpoints["docker"].Host, source: "context " + name}
	tls := filepath.Join(dir, "contexts", "tls", id, "docker")
	if _, err := os.Stat(filepath.Join(tls, "ca.pem")); err == nil {
		ep.TLSCA, ep.TLSCert, ep.TLSKey = filepath.Join(tls, "ca.pem"), filepath.Join(tls, "cert.pem"), filepath.Join(tls, "key.pem")
	}
	return ep, nil
}

// dockerConfigDir is $DOCKER_CONFIG, else ~/.docker.
func dockerConfigDir(opts sandbox.FactoryOptions) string {
	if d, _ := opts.Getenv("DOCKER_CONFIG"); d != "" {
		return d
	}
	home, _ := opts.Getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".docker")
}

// newClient builds an Engine API client; it negotiates the API version down to the
// engine's on its first request (Debian 12's engine speaks 1.41).
func newClient(ep endpoint) (*client.Client, error) {
	if strings.HasPrefix(ep.Host, "ssh://") {
		return nil, fmt.Errorf("docker: engine %s (%s): ssh:// engines are not supported; forward the remote socket (ssh "+
			"-L /tmp/docker.sock:/var/run/docker.sock HOST) and set docker.host to "+
			"unix:///tmp/docker.sock: %w",
			ep.Host, ep.source, sandbox.ErrUnsupported)
	}
	opts := []client.Opt{client.WithHost(ep.Host)}
	if ep.TLSCA != "" {
		opts = append(opts, client.WithTLSClientConfig(ep.TLSCA, ep.TLSCert, ep.TLSKey))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker: engine %s (%s): %v: %w", ep.Host, ep.source, err, sandbox.ErrInvalidConfig)
	}
	return cli, nil
}

// containerEnv is the environment every container starts with: HOME in the workspace and
// docker.env's literal values. It goes into the container's configuration, never onto a
// command line; changing it makes new containers.
func containerEnv(cfg config.DockerConfig) []string {
	env := map[string]string{"HOME": workdir(cfg)}
	if cfg.EffectiveNetwork() == config.NetworkAllowlist {
		for k, v := range egress.ProxyEnv() {
			env[k] = v
		}
	}
	for k, v := range cfg.Env {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// passthroughEnv takes the values of docker.env_passthrough (and terminal.env_passthrough)
// names from the caller's environment. They go to the helper's exec, not the container, so
// a rotated token does not cost the session its container; a name added later reaches
// existing sessions, as with the other backends (the helper adds names it has not seen).
func passthroughEnv(cfg config.DockerConfig, opts sandbox.FactoryOptions) []string {
	out := opts.Passthrough(cfg.EnvPassthrough...)
	sort.Strings(out)
	return out
}

// envMap turns NAME=VALUE entries into a map.
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func workdir(cfg config.DockerConfig) string {
	if cfg.Cwd == "" {
		return "/workspace"
	}
	return cfg.Cwd
}

// userSpec splits docker.user into its user and group parts.
func userSpec(u string) (user, group string) {
	user, group, _ = strings.Cut(u, ":")
	return user, group
}

func isNumeric(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// volumeSpec is one parsed docker.volumes entry.
type volumeSpec struct {
	spec     string
	source   string // absolute host path, or a volume name
	target   string
	readOnly bool
	bind     bool
}

func parseVolumes(specs []string, homeDir string) ([]volumeSpec, error) {
	var out []volumeSpec
	for _, s := range specs {
		parts := strings.Split(s, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("docker.volumes %q: want HOST:CONTAINER[:ro]: %w", s, sandbox.ErrInvalidConfig)
		}
		v := volumeSpec{spec: s, source: parts[0], target: parts[1]}
		if len(parts) == 3 {
			switch parts[2] {
			case "ro":
				v.readOnly = true
			case "rw":
			default:
				return nil, fmt.Errorf("docker.volumes %q: mode %q must be ro or rw: %w", s, parts[2], sandbox.ErrInvalidConfig)
			}
		}
		if v.source == "~" || strings.HasPrefix(v.source, "~/") {
			v.source = homeDir + v.source[1:]
		}
		v.bind = strings.HasPrefix(v.source, "/")
		if !strings.HasPrefix(v.target, "/") {
			return nil, fmt.Errorf("docker.volumes %q: container path must be absolute: %w", s, sandbox.ErrInvalidConfig)
		}
		out = append(out, v)
	}
	return out, nil
}

// gpuRequests turns docker.gpus (as for `docker run --gpus`: all, a count, or
// device=ID[,ID]) into device requests.
func gpuRequests(s string) ([]container.DeviceRequest, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	req := container.DeviceRequest{Capabilities: [][]string{{"gpu"}}}
	for _, field := range splitGPU(s) {
		k, v, hasEq := strings.Cut(field, "=")
		switch {
		case !hasEq && k == "all":
			req.Count = -1
		case !hasEq:
			n, err := strconv.Atoi(k)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("docker.gpus %q: want all, a count, or device=ID[,ID]: %w", s, sandbox.ErrInvalidConfig)
			}
			req.Count = n
		case k == "count":
			if v == "all" {
				req.Count = -1
			} else if n, err := strconv.Atoi(v); err == nil && n > 0 {
				req.Count = n
			} else {
				return nil, fmt.Errorf("docker.gpus %q: bad count: %w", s, sandbox.ErrInvalidConfig)
			}
		case k == "device":
			req.DeviceIDs = strings.Split(v, ",")
		case k == "driver":
			req.Driver = v
		case k == "capabilities":
			req.Capabilities = [][]string{strings.Split(v, ",")}
		default:
			return nil, fmt.Errorf("docker.gpus %q: unknown option %q: %w", s, k, sandbox.ErrInvalidConfig)
		}
	}
	return []container.DeviceRequest{req}, nil
}

// splitGPU splits "device=0,1,driver=nvidia" on commas that start a new key.
func splitGPU(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if len(out) > 0 && !strings.Contains(p, "=") && strings.Contains(out[len(out)-1], "=") &&
			(strings.HasPrefix(out[len(out)-1], "device=") || strings.HasPrefix(out[len(out)-1], "capabilities=")) {
			out[len(out)-1] += "," + p
			continue
		}
		out = append(out, p)
	}
	return out
}

// validate checks what can be checked without the engine; it runs before anything is made.
func (b *Backend) validate() error {
	if b.cfg.MemoryLimit > 0 && b.cfg.MemoryLimit < minMemory {
		return fmt.Errorf("docker.memory_limit %s is below the %s a sandbox needs for its helper and shell: raise it (hermes-sandbox config set docker.memory_limit 512m): %w",
			b.cfg.MemoryLimit, config.Size(minMemory), sandbox.ErrInvalidConfig)
	}
	if strings.TrimSpace(b.cfg.Image) == "" {
		return fmt.Errorf("docker.image is empty: set one (hermes-sandbox config set docker.image IMAGE): %w", sandbox.ErrInvalidConfig)
	}
	vols, err := parseVolumes(b.cfg.Volumes, b.home())
	if err != nil {
		return err
	}
	if b.local {
		for _, v := range vols {
			if !v.bind {
				continue
			}
			if _, err := os.Stat(v.source); err != nil {
				return fmt.Errorf("docker.volumes %q: host path %s does not exist: create it or fix docker.volumes: %w", v.spec, v.source, sandbox.ErrInvalidConfig)
			}
		}
	}
	if _, err := gpuRequests(b.cfg.GPUs); err != nil {
		return err
	}
	return nil
}

func (b *Backend) home() string {
	if h, ok := b.opts.Getenv("HOME"); ok && h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// tmpSize is the /tmp tmpfs size: half the memory limit (tmpfs pages count against it, so a
// full /tmp must leave room to run), at most 256 MiB.
func (b *Backend) tmpSize() int64 {
	size := int64(tmpMax)
	if m := b.cfg.MemoryLimit.Bytes(); m > 0 && m/2 < size {
		size = m / 2
	}
	return size
}

// tmpOptions are the /tmp tmpfs's options: exec (tmpfs is noexec unless told), nosuid,
// nodev, bounded. runc gives the tmpfs the mode of the image's own /tmp directory, which in
// a bare root filesystem can be 0755; so the tmpfs also belongs to the sandbox user, and the
// helper can always make its state directory there.
// Podman refuses uid= and gid= on a tmpfs ("unknown mount option"); its own option U gives
// the tmpfs to the container's user instead.
func (b *Backend) tmpOptions(ids userIDs) string {
	if b.eng.podman {
		return fmt.Sprintf("rw,nosuid,nodev,exec,mode=1777,size=%d,U", b.tmpSize())
	}
	return fmt.Sprintf("rw,nosuid,nodev,exec,mode=1777,size=%d,uid=%d,gid=%d", b.tmpSize(), ids.uid, ids.gid)
}

// workspaceMounted reports whether docker.volumes already mounts something at the workspace.
func (b *Backend) workspaceMounted(vols []volumeSpec) bool {
	for _, v := range vols {
		if filepath.Clean(v.target) == filepath.Clean(workdir(b.cfg)) {
			return true
		}
	}
	return false
}

// containerSpec is how a container is made: the configuration, host configuration and the
// name of its workspace volume ("" when docker.volumes mounts the workspace).
type containerSpec struct {
	config    *container.Config
	host      *container.HostConfig
	workspace string
}

// specHash identifies the settings a container was made with. A live session's container
// made from other settings is kept (see staleSettings); only a new session, `sessions rm` or
// `exec --recreate` gets a container with the current ones.
func (b *Backend) specHash() string {
	h := sha256.New()
	fmt.Fprintf(h, "v1\x00%s\x00%v\x00%d\x00%g\x00%d\x00%v\x00%v\x00%q\x00%s\x00%s\x00%q\x00%q\x00%s\x00%q\x00%s\x00%s\x00%q",
		b.image(), b.networkSpec(), b.cfg.MemoryLimit, b.cfg.CPUQuota, b.cfg.PidsLimit, b.cfg.ReadOnlyRootfs,
		b.cfg.Privileged, b.cfg.SecurityOpt, b.cfg.User, workdir(b.cfg), b.cfg.Volumes, b.env, b.cfg.GPUs, b.cfg.ExtraHosts,
		b.runtimeSpec(), fmt.Sprintf("%s@%d-%d", b.agent.Path, b.agent.Size, b.agent.ModTime.UnixNano()), b.agent.Args)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// settingParts names each setting that goes into specHash, with its value, so that a kept
// container can say which of the current settings it does not use. Values are hashed before
// they go onto a label (docker.env may hold literal secrets).
func (b *Backend) settingParts() [][2]string {
	return [][2]string{
		{"docker.image", b.image()},
		{"docker.network", fmt.Sprint(b.networkSpec())},
		{"docker.memory_limit", fmt.Sprint(b.cfg.MemoryLimit)},
		{"docker.cpu_quota", fmt.Sprint(b.cfg.CPUQuota)},
		{"docker.pids_limit", fmt.Sprint(b.cfg.PidsLimit)},
		{"docker.read_only_rootfs", fmt.Sprint(b.cfg.ReadOnlyRootfs)},
		{"docker.privileged", fmt.Sprint(b.cfg.Privileged)},
		{"docker.security_opt", fmt.Sprintf("%q", b.cfg.SecurityOpt)},
		{"docker.user", b.cfg.User},
		{"docker.cwd", workdir(b.cfg)},
		{"docker.volumes", fmt.Sprintf("%q", b.cfg.Volumes)},
		{"docker.env", fmt.Sprintf("%q", b.env)},
		{"docker.gpus", b.cfg.GPUs},
		{"docker.extra_hosts", fmt.Sprintf("%q", b.cfg.ExtraHosts)},
		{"docker.runtime", b.runtimeSpec()},
		{"helper binary", fmt.Sprintf("%s@%d-%d %q", b.agent.Path, b.agent.Size, b.agent.ModTime.UnixNano(), b.agent.Args)},
	}
}

// settingsLabel is the labelSettings value: name=hash pairs, one per settingParts entry.
func (b *Backend) settingsLabel() string {
	var out []string
	for _, p := range b.settingParts() {
		sum := sha256.Sum256([]byte(p[1]))
		out = append(out, p[0]+"="+hex.EncodeToString(sum[:])[:12])
	}
	return strings.Join(out, ",")
}

// staleSettings lists the current settings a container made with labels does not use (nil
// when it was made from the current ones). A container from before labelSettings existed
// says so as a whole.
func (b *Backend) staleSettings(labels map[string]string) []string {
	if labels[labelSpec] == b.specHash() {
		return nil
	}
	had, ok := labels[labelSettings]
	if !ok {
		return []string{"settings changed since it was made (an earlier version made it)"}
	}
	was := map[string]string{}
	for _, kv := range strings.Split(had, ",") {
		k, v, _ := strings.Cut(kv, "=")
		was[k] = v
	}
	var out []string
	for _, kv := range strings.Split(b.settingsLabel(), ",") {
		k, v, _ := strings.Cut(kv, "=")
		if was[k] != v {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		out = []string{"settings changed since it was made"}
	}
	return out
}

// runtimeSpec is docker.runtime's part of specHash: under gVisor, containers made before its
// processes were bounded inside (gvisorHostPids) count as made from other settings.
func (b *Backend) runtimeSpec() string {
	if b.eng.gvisor {
		return b.cfg.Runtime + " (gvisor nproc)"
	}
	return b.cfg.Runtime
}

// networkSpec is the network's part of specHash: none and open hash as network_enabled
// false and true always did, so containers made before docker.network existed are kept.
func (b *Backend) networkSpec() any {
	switch b.network() {
	case config.NetworkNone:
		return false
	case config.NetworkOpen:
		return true
	}
	return b.network()
}

// spec builds the hardened container for name. role is "session" or "pool"; ids is the
// sandbox user (see userIDs).
func (b *Backend) spec(name, role, session string, ids userIDs) (containerSpec, error) {
	cfg := b.cfg
	vols, err := parseVolumes(cfg.Volumes, b.home())
	if err != nil {
		return containerSpec{}, err
	}
	gpus, err := gpuRequests(cfg.GPUs)
	if err != nil {
		return containerSpec{}, err
	}
	labels := map[string]string{labelOurs: "1", labelScope: b.scope, labelRole: role,
		labelCreated: time.Now().UTC().Format(time.RFC3339Nano), labelSpec: b.specHash(), labelSettings: b.settingsLabel()}
	switch role {
	case roleSession:
		labels[labelSession] = session
		if b.opts.Ephemeral {
			labels[labelOwner] = b.owner
		}
	case rolePool:
		labels[labelPool] = sandbox.ProcessOwner()
	}
	for k, v := range b.extra.Labels {
		labels[k] = v
	}
	entry := append([]string{agentInCtr}, b.agent.Args...)
	entry = append(entry, "idle")
	c := &container.Config{
		Image:      b.image(),
		User:       cfg.User,
		Env:        b.env,
		WorkingDir: workdir(cfg),
		Entrypoint: entry,
		Labels:     labels,
	}
	hc := &container.HostConfig{
		ReadonlyRootfs: cfg.ReadOnlyRootfs,
		Privileged:     cfg.Privileged,
		SecurityOpt:    slices.Clone(cfg.SecurityOpt),
		Init:           ptr(b.eng.init), // else the helper's idle entrypoint is PID 1 and reaps (engine.go)
		Tmpfs:          map[string]string{"/tmp": b.tmpOptions(ids)},
		ExtraHosts:     slices.Clone(cfg.ExtraHosts),
		Runtime:        cfg.Runtime,
		LogConfig:      container.LogConfig{Type: "none"},
		Resources: container.Resources{
			NanoCPUs:       int64(cfg.CPUQuota * 1e9),
			DeviceRequests: gpus,
		},
		Mounts: []mount.Mount{{Type: mount.TypeBind, Source: b.agent.Path, Target: agentInCtr, ReadOnly: true}},
	}
	for _, u := range b.eng.ulimits {
		// Podman asks for more open files and processes than some hosts allow, and runc
		// then fails to start the container (engine.go).
		if u.Name == "nproc" && b.eng.gvisor && cfg.PidsLimit > 0 {
			continue // set below
		}
		hc.Ulimits = append(hc.Ulimits, &container.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	if b.network() != config.NetworkOpen {
		// none, and allowlist too: its only way out is the relay to this process's proxy.
		hc.NetworkMode = "none"
	}
	if b.network() == config.NetworkAllowlist {
		// The relay's fast path to the proxy: a unix socket directory (see egressSockDir).
		dir, err := b.egressSockDir()
		if err != nil {
			return containerSpec{}, err
		}
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: dir, Target: egressSockInCtr, ReadOnly: true})
	}
	if !cfg.Privileged {
		hc.CapDrop = []string{"ALL"}
	}
	if m := cfg.MemoryLimit.Bytes(); m > 0 {
		hc.Memory = m
		hc.MemorySwap = m // no swap: the limit is the limit
	}
	if cfg.PidsLimit > 0 {
		hc.PidsLimit = ptr(cfg.PidsLimit)
		if b.eng.gvisor {
			// gVisor's kernel bounds the processes; the host's cgroup its threads (engine.go).
			hc.PidsLimit = ptr(gvisorHostPids(cfg.PidsLimit))
			hc.Ulimits = append(hc.Ulimits, &container.Ulimit{Name: "nproc", Soft: cfg.PidsLimit, Hard: cfg.PidsLimit})
		}
	}
	if role == rolePool && b.recycles() {
		// PID 1 is then the idle helper, which refuses tracing; docker-init would not, and a
		// task could plant code in it that outlives the reset (recycle.go).
		hc.Init = ptr(false)
	}
	spec := containerSpec{config: c, host: hc}
	if !b.workspaceMounted(vols) {
		spec.workspace = name + "-ws"
		volLabels := map[string]string{labelOurs: "1", labelScope: b.scope, labelRole: "workspace"}
		for k, v := range b.extra.Labels {
			volLabels[k] = v
		}
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Source: spec.workspace, Target: workdir(cfg),
			VolumeOptions: &mount.VolumeOptions{Labels: volLabels}})
	}
	for _, v := range vols {
		m := mount.Mount{Type: mount.TypeVolume, Source: v.source, Target: v.target, ReadOnly: v.readOnly}
		if v.bind {
			m.Type = mount.TypeBind
		}
		hc.Mounts = append(hc.Mounts, m)
	}
	return spec, nil
}

// Warnings lists each setting that weakens the default isolation, one sentence each.
func (b *Backend) Warnings() []string {
	cfg := b.cfg
	var w []string
	if cfg.Privileged {
		w = append(w, "docker.privileged is true: the container can use every host device and capability, so a command can take over the host")
	}
	if b.network() == config.NetworkOpen {
		key := "docker.network is open"
		if cfg.Network == "" {
			key = "docker.network_enabled is true"
		}
		w = append(w, key+": commands can reach the network (exfiltration, downloads); docker.network allowlist with docker.egress_allow lets through only the hosts you list")
	}
	if d := b.diskWarning(); d != "" {
		w = append(w, d)
	}
	if !cfg.ReadOnlyRootfs {
		w = append(w, "docker.read_only_rootfs is false: commands can modify the image's files, and docker.disk_limit does not bound what they write there")
	}
	if cfg.PidsLimit == 0 {
		w = append(w, "docker.pids_limit is 0 (unlimited): a fork bomb can exhaust the host's process table")
	}
	if cfg.MemoryLimit == 0 {
		w = append(w, "docker.memory_limit is 0 (unlimited): a command can use all of the host's memory")
	}
	if !slices.ContainsFunc(cfg.SecurityOpt, func(s string) bool {
		return s == "no-new-privileges" || s == "no-new-privileges:true" || s == "no-new-privileges=true"
	}) {
		w = append(w, "docker.security_opt lacks no-new-privileges: setuid programs in the image can gain privileges")
	}
	if u, _ := userSpec(cfg.User); u == "" || u == "0" || u == "root" {
		w = append(w, fmt.Sprintf("docker.user is %q: commands run as root inside the container", cfg.User))
	}
	for _, s := range cfg.SecurityOpt {
		if strings.Contains(s, "unconfined") {
			w = append(w, fmt.Sprintf("docker.security_opt %q turns a kernel protection off", s))
		}
	}
	if vols, err := parseVolumes(cfg.Volumes, b.home()); err == nil {
		for _, v := range vols {
			switch {
			case v.bind && (v.source == "/" || strings.HasSuffix(v.source, "docker.sock")):
				w = append(w, fmt.Sprintf("docker.volumes %q gives the sandbox control of the host", v.spec))
			case v.bind && !v.readOnly:
				w = append(w, fmt.Sprintf("docker.volumes %q: commands can change host files under %s", v.spec, v.source))
			}
		}
	}
	for _, n := range slices.Concat(cfg.EnvPassthrough, b.opts.EnvPassthrough) {
		if sandbox.LooksSecret(n) {
			w = append(w, fmt.Sprintf("%s is passed into the sandbox (env_passthrough): commands can read it", n))
		}
	}
	return w
}

func ptr[T any](v T) *T { return &v }
