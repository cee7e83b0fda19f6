// Package config loads, validates and edits the hermes-sandbox configuration.
//
// Settings live in one YAML file, $XDG_CONFIG_HOME/hermes-sandbox/config.yaml
// by default, with credentials in secrets.yaml beside it (mode 0600). They are
// resolved in one place, in this order: defaults (NewConfig), the config file,
// the secrets file, the environment (HERMES_SANDBOX_<SECTION>_<KEY>), flags
// (applied by the caller with SetValue or by assigning fields), and finally
// Validate. Decoding is strict: an unknown key is an error that names the key,
// its line and the closest valid key.
//
// Each section is a plain struct with Go-typed fields (time.Duration, Size,
// enums, Secret) that backends use directly, e.g. cfg.Docker or cfg.SSH.
//
// `hermes-sandbox gc` (sandbox.Reap) removes a session idle longer than --idle, else its
// backend's idle timeout; each backend has one idle clock:
//
//	backend      idle clock                                          idle timeout without --idle
//	docker       the session record's mtime (last command), else     docker.idle_timeout
//	             the container's creation
//	modal        the session record's mtime (last command)           modal.idle_timeout
//	singularity  the session record's mtime (last helper start       none: idle instances kept
//	             or close)
//	daytona      the service's lastActivityAt, else createdAt        daytona.auto_stop
//	vercel       the service's statusUpdatedAt/updatedAt (stopped)   none: stopped sandboxes kept
//	kubernetes   the pod's hermes-sandbox/used annotation            1h
//
// A session whose last use is unknown is kept.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is the whole configuration. Build one with NewConfig or Load.
type Config struct {
	Terminal    TerminalConfig    `yaml:"terminal"`
	Docker      DockerConfig      `yaml:"docker"`
	SSH         SSHConfig         `yaml:"ssh"`
	Singularity SingularityConfig `yaml:"singularity"`
	Modal       ModalConfig       `yaml:"modal"`
	Daytona     DaytonaConfig     `yaml:"daytona"`
	Vercel      VercelConfig      `yaml:"vercel"`
	Kubernetes  KubernetesConfig  `yaml:"kubernetes"`
	Approvals   ApprovalsConfig   `yaml:"approvals"`
	Tools       ToolsConfig       `yaml:"tools"`
	Loop        LoopConfig        `yaml:"loop"`
	Audit       AuditConfig       `yaml:"audit"`
	MCP         MCPConfig         `yaml:"mcp"`
	Local       LocalConfig       `yaml:"local"`
	Secrets     SecretsConfig     `yaml:"secrets"`
	Egress      EgressConfig      `yaml:"egress"`

	path        string
	secretsPath string
	fileLoaded  bool
	env         envMap
	ignoreEnv   []string // LoadWith's Options.IgnoreEnv, for Reload
	origins     map[string]origin
}

// TerminalConfig is the terminal section: which backend runs commands and how.
type TerminalConfig struct {
	Backend     Backend       `yaml:"backend"`      // auto picks the first usable backend
	Timeout     time.Duration `yaml:"timeout"`      // per-command timeout
	Cwd         string        `yaml:"cwd"`          // working directory; "" = backend default
	Shell       Shell         `yaml:"shell"`        // auto, bash, sh or an absolute path
	OutputLimit int           `yaml:"output_limit"` // max bytes of output returned per command
	// SpillLimit bounds one command's spill file of its complete output (head and tail kept).
	SpillLimit Size `yaml:"spill_limit"`
	// JobTimeout is how long a background job may run before it is killed (exit 124).
	JobTimeout time.Duration `yaml:"job_timeout"`
	// MaxJobs is how many background jobs may run at once in one session.
	MaxJobs int `yaml:"max_jobs"`
	// KeepAlive is how long a session owner keeps a session warm for the next CLI exec after
	// the last one ends; 0 runs every exec in its own process, with no owner.
	KeepAlive      time.Duration `yaml:"keep_alive"`
	EnvPassthrough []string      `yaml:"env_passthrough"` // host env vars passed into the sandbox
	StateDir       string        `yaml:"state_dir"`       // "" = default; see Config.StateDir
	// Persistence: session keeps a session's sandbox between commands; ephemeral gives each
	// command a fresh one, removed when it ends (as `exec --ephemeral`).
	Persistence Persistence `yaml:"persistence"`
	// EgressAllow is the egress allowlist shared by backends that can enforce one (docker
	// with docker.network allowlist, unless docker.egress_allow is set; kubernetes with
	// kubernetes.network allowlist, unless kubernetes.egress_allow is set). A backend that
	// cannot enforce it refuses to run rather than pretend (see README, "Network egress").
	EgressAllow []string `yaml:"egress_allow"`
	// SnapshotTTL is how old a session snapshot (`sessions snapshot`) may get before `gc`
	// removes it; 0 keeps snapshots until they are removed by hand.
	SnapshotTTL time.Duration `yaml:"snapshot_ttl"`
}

// DockerConfig is the docker section.
type DockerConfig struct {
	Image          string `yaml:"image"`
	NetworkEnabled bool   `yaml:"network_enabled"` // the seed's spelling: false = none, true = open
	// Network is none, allowlist or open; "" follows network_enabled.
	Network NetworkMode `yaml:"network"`
	// EgressAllow lists the hosts an allowlist network reaches ("" = terminal.egress_allow).
	EgressAllow []string `yaml:"egress_allow"`
	MemoryLimit Size     `yaml:"memory_limit"`
	CPUQuota    float64  `yaml:"cpu_quota"`  // number of CPUs (fractional allowed)
	PidsLimit   int64    `yaml:"pids_limit"` // 0 = unlimited
	// DiskLimit bounds a session's workspace volume (0 = unlimited).
	DiskLimit      Size              `yaml:"disk_limit"`
	ReadOnlyRootfs bool              `yaml:"read_only_rootfs"`
	Privileged     bool              `yaml:"privileged"`
	SecurityOpt    []string          `yaml:"security_opt"`
	User           string            `yaml:"user"` // "" = image default
	Cwd            string            `yaml:"cwd"`
	Volumes        []string          `yaml:"volumes"` // host:container[:ro|rw]
	Env            map[string]string `yaml:"env"`
	EnvPassthrough []string          `yaml:"env_passthrough"`
	GPUs           string            `yaml:"gpus"` // as for docker run --gpus; "" = none
	ExtraHosts     []string          `yaml:"extra_hosts"`
	Runtime        string            `yaml:"runtime"`      // e.g. runsc; "" = engine default
	IdleTimeout    time.Duration     `yaml:"idle_timeout"` // 0 = never reap idle containers
	PoolSize       int               `yaml:"pool_size"`    // pre-started containers; 0 = none
	Host           string            `yaml:"host"`         // engine address; "" = DOCKER_HOST or default
}

// SSHConfig is the ssh section, plus the ssh secrets.
type SSHConfig struct {
	Host                  string        `yaml:"host"`
	User                  string        `yaml:"user"` // "" = current user
	Port                  int           `yaml:"port"`
	Key                   string        `yaml:"key"` // local path; may start with ~
	Cwd                   string        `yaml:"cwd"` // remote path; "~" is the remote home
	PasswordAuth          bool          `yaml:"password_auth"`
	StrictHostKeyChecking HostKeyPolicy `yaml:"strict_host_key_checking"`
	ConnectTimeout        time.Duration `yaml:"connect_timeout"`
	KnownHosts            string        `yaml:"known_hosts"` // local path; may start with ~
	Keepalive             time.Duration `yaml:"keepalive"`   // 0 = no keepalives

	Password      Secret `yaml:"password"`       // secrets.yaml
	KeyPassphrase Secret `yaml:"key_passphrase"` // secrets.yaml
}

// SingularityConfig is the singularity (Apptainer) section.
type SingularityConfig struct {
	Image      string   `yaml:"image"`
	Readonly   bool     `yaml:"readonly"`
	Executable string   `yaml:"executable"` // "" = apptainer or singularity from PATH
	Cwd        string   `yaml:"cwd"`
	Binds      []string `yaml:"binds"` // src[:dst[:ro|rw]]
}

// ModalConfig is the modal section, plus the Modal secrets.
type ModalConfig struct {
	Image        string        `yaml:"image"`
	GPU          string        `yaml:"gpu"`
	App          string        `yaml:"app"`
	CPU          float64       `yaml:"cpu"`    // 0 = provider default
	MemoryMiB    int           `yaml:"memory"` // MiB; 0 = provider default
	Timeout      time.Duration `yaml:"timeout"`
	BlockNetwork bool          `yaml:"block_network"`
	// IdleTimeout ends a sandbox nothing has used for this long (Modal enforces it; gc too).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// CIDRAllowlist, when set, opens the network to these outbound CIDRs only
	// (needs block_network: false).
	CIDRAllowlist []string `yaml:"cidr_allowlist"`
	// RestoreFromSnapshot starts a recreated sandbox from the session's last snapshot.
	RestoreFromSnapshot bool `yaml:"restore_from_snapshot"`
	// ServerURL is Modal's API address ("" = ~/.modal.toml's, else https://api.modal.com:443).
	ServerURL string `yaml:"server_url"`

	TokenID     Secret `yaml:"token_id"`     // secrets.yaml or MODAL_TOKEN_ID
	TokenSecret Secret `yaml:"token_secret"` // secrets.yaml or MODAL_TOKEN_SECRET
}

// DaytonaConfig is the daytona section, plus the Daytona secret.
type DaytonaConfig struct {
	Image           string        `yaml:"image"`    // set image or snapshot, not both
	Snapshot        string        `yaml:"snapshot"` //
	AutoStop        time.Duration `yaml:"auto_stop"`
	APIURL          string        `yaml:"api_url"` // "" = provider default
	Target          string        `yaml:"target"`
	CPU             int           `yaml:"cpu"`    // 0 = provider default
	MemoryGiB       int           `yaml:"memory"` // GiB; 0 = provider default
	NetworkBlockAll bool          `yaml:"network_block_all"`
	// AutoArchive moves a stopped sandbox to cheap storage after this long (0 = provider
	// default, 7 days); AutoDelete deletes a stopped sandbox after this long (0 = never).
	AutoArchive      time.Duration `yaml:"auto_archive"`
	AutoDelete       time.Duration `yaml:"auto_delete"`
	DiskGiB          int           `yaml:"disk"`               // GiB; 0 = provider default
	NetworkAllowList []string      `yaml:"network_allow_list"` // CIDRs reachable despite network_block_all
	OrganizationID   string        `yaml:"organization_id"`    // sent with a JWT api_key
	// Channel is how commands reach the sandbox: the helper over the PTY WebSocket, one
	// toolbox process session per command, or auto (the helper, else sessions).
	Channel DaytonaChannel `yaml:"channel"`

	APIKey Secret `yaml:"api_key"` // secrets.yaml or DAYTONA_API_KEY
}

// VercelConfig is the vercel section, plus the Vercel secrets.
type VercelConfig struct {
	Runtime   string        `yaml:"runtime"`
	ProjectID string        `yaml:"project_id"`
	TeamID    string        `yaml:"team_id"`
	VCPUs     int           `yaml:"vcpus"` // 0 = provider default
	Timeout   time.Duration `yaml:"timeout"`
	APIURL    string        `yaml:"api_url"` // "" = provider default
	// Ports (numbers) are exposed through the sandbox's routes.
	Ports []string `yaml:"ports"`
	// NetworkAllow lists the domains commands may reach; empty = no network (deny-all).
	NetworkAllow []string `yaml:"network_allow"`

	Token     Secret `yaml:"token"`      // secrets.yaml or VERCEL_TOKEN
	OIDCToken Secret `yaml:"oidc_token"` // secrets.yaml or VERCEL_OIDC_TOKEN
}

// KubernetesConfig is the kubernetes section: one hardened pod per session on a cluster the
// user already has, reached through kubeconfig as kubectl finds it.
type KubernetesConfig struct {
	// Kubeconfig is the kubeconfig file ("" = $KUBECONFIG, else ~/.kube/config, else the
	// in-cluster service account).
	Kubeconfig string `yaml:"kubeconfig"`
	Context    string `yaml:"context"`   // "" = the kubeconfig's current context
	Namespace  string `yaml:"namespace"` // "" = the context's namespace, else "default"
	Image      string `yaml:"image"`
	// Resources of the sandbox container (0 = none requested, the namespace's defaults).
	CPU              float64 `yaml:"cpu"`               // cores, e.g. 0.5
	Memory           Size    `yaml:"memory"`            // limit and request
	EphemeralStorage Size    `yaml:"ephemeral_storage"` // limit and request
	// WorkspaceSize bounds the writable workspace (an emptyDir); /tmp gets a quarter of it.
	WorkspaceSize Size `yaml:"workspace_size"`
	// RuntimeClass names a node.k8s.io RuntimeClass (gvisor, kata…); "" = the cluster default.
	RuntimeClass string            `yaml:"runtime_class"`
	NodeSelector map[string]string `yaml:"node_selector"`
	// Tolerations, each "key[=value]:Effect" (Effect NoSchedule, PreferNoSchedule, NoExecute
	// or "" for any), or "*" to tolerate every taint.
	Tolerations []string `yaml:"tolerations"`
	// RunAsUser is the non-root uid (and gid) commands run as.
	RunAsUser int64 `yaml:"run_as_user"`
	// MaxLifetime is the pod's activeDeadlineSeconds: the cluster ends it after this long.
	MaxLifetime time.Duration `yaml:"max_lifetime"`
	// NetworkEnabled is the old spelling of Network: false = none, true = open.
	NetworkEnabled bool `yaml:"network_enabled"`
	// Network is none, allowlist or open; "" follows network_enabled. none and allowlist
	// add a deny-all-egress NetworkPolicy (enforced by NetworkPolicy-capable CNIs only);
	// allowlist also runs this tool's filtering proxy behind a relay in the pod.
	Network NetworkMode `yaml:"network"`
	// EgressAllow lists the hosts an allowlist network reaches ("" = terminal.egress_allow).
	EgressAllow []string `yaml:"egress_allow"`
	// Mode is pod (a bare pod per session) or agent-sandbox (an agents.x-k8s.io Sandbox).
	Mode KubernetesMode `yaml:"mode"`
	// PoolSize keeps this many ready pods to hand to new sessions (0 = none).
	PoolSize int `yaml:"pool_size"`
	// StartTimeout bounds waiting for a pod to be scheduled and running.
	StartTimeout time.Duration `yaml:"start_timeout"`
}

// ApprovalsConfig is the approvals section.
type ApprovalsConfig struct {
	Mode             ApprovalMode  `yaml:"mode"`
	Timeout          time.Duration `yaml:"timeout"`
	CommandAllowlist []string      `yaml:"command_allowlist"`
}

// ToolsConfig is the tools section: which tools are offered to the agent.
type ToolsConfig struct {
	ShellExecute  bool `yaml:"shell_execute"`
	CodeExecution bool `yaml:"code_execution"`
	FileWrite     bool `yaml:"file_write"`
	FileSystem    bool `yaml:"file_system"`
}

// LoopConfig is the loop section.
type LoopConfig struct {
	MaxToolCalls int `yaml:"max_tool_calls"` // 0 = unlimited
}

// AuditConfig is the audit section.
type AuditConfig struct {
	Enabled        bool       `yaml:"enabled"`
	Level          AuditLevel `yaml:"level"`
	LogDestination string     `yaml:"log_destination"` // local path; may start with ~
	// OnFailure is what happens to a call whose intent cannot be recorded: refuse it, or run
	// it and warn.
	OnFailure AuditOnFailure `yaml:"on_failure"`
	// Witness sends each record's seq and MAC to the system log: "", syslog or journald.
	Witness AuditWitness `yaml:"witness"`
	// WitnessSocket overrides the witness's socket (/dev/log, /run/systemd/journal/socket).
	WitnessSocket string `yaml:"witness_socket"`
	// Sealed is set by `audit init`: the log must be sealed, so a log found without its
	// sealing state (both deleted, or replaced) refuses calls instead of starting unsealed.
	Sealed bool `yaml:"sealed"`
}

// MCPConfig is the mcp section.
type MCPConfig struct {
	Listen string `yaml:"listen"` // host:port
	// MaxSessions is how many MCP sessions may hold a sandbox session at once; one more
	// gets an error from its tool calls until another ends.
	MaxSessions int `yaml:"max_sessions"`
	// SessionIdleTimeout ends an HTTP session idle this long; its sandbox session is then
	// removed (kept with --keep-sessions).
	SessionIdleTimeout time.Duration `yaml:"session_idle_timeout"`
	// DrainTimeout is how long a server told to stop (SIGTERM) lets running commands finish
	// before it cancels them and removes its sessions.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// TLSCert and TLSKey are PEM files: with both set, `mcp --http` serves HTTPS. A listener
	// beyond loopback needs them (or --insecure-http), as a bearer key sent in clear text
	// can be read off the network.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
}

// BuiltDockerImage is the image `make run` builds from Debian's packages (python3 and git), with
// no registry: BuildDockerImage. With docker.image left at its default and that default not on
// the engine, the docker backend runs this image when the engine has it.
const BuiltDockerImage = "hermes-sandbox/python:3"

// BuildDockerImage is the command that builds BuiltDockerImage (root and debootstrap; the
// packages come from the Debian archive apt uses, not from a container registry).
const BuildDockerImage = "sudo hermes-sandbox image build --debian bookworm --packages python3,git --tag " + BuiltDockerImage

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{
		Terminal: TerminalConfig{
			Backend:        BackendAuto,
			Timeout:        180 * time.Second,
			Shell:          ShellAuto,
			OutputLimit:    50000,
			SpillLimit:     64 * Mebibyte,
			JobTimeout:     24 * time.Hour,
			MaxJobs:        16,
			KeepAlive:      10 * time.Minute,
			EnvPassthrough: []string{},
			Persistence:    PersistenceSession,
			EgressAllow:    []string{},
			SnapshotTTL:    7 * 24 * time.Hour,
		},
		Docker: DockerConfig{
			Image:          "python:3.12-slim",
			MemoryLimit:    512 * Mebibyte,
			CPUQuota:       1.0,
			PidsLimit:      256,
			DiskLimit:      10 * Gibibyte,
			ReadOnlyRootfs: true,
			SecurityOpt:    []string{"no-new-privileges:true"},
			User:           "1000:1000",
			Cwd:            "/workspace",
			Volumes:        []string{},
			Env:            map[string]string{},
			EnvPassthrough: []string{},
			ExtraHosts:     []string{},
			EgressAllow:    []string{},
			IdleTimeout:    30 * time.Minute,
		},
		SSH: SSHConfig{
			Port:                  22,
			Key:                   "~/.ssh/id_ed25519",
			Cwd:                   "~",
			StrictHostKeyChecking: HostKeyAcceptNew,
			ConnectTimeout:        10 * time.Second,
			KnownHosts:            "~/.ssh/known_hosts",
			Keepalive:             15 * time.Second,
		},
		Singularity: SingularityConfig{Readonly: true, Binds: []string{}},
		Modal: ModalConfig{
			Image:        "python:3.12-slim",
			App:          "hermes-sandbox",
			Timeout:      time.Hour,
			IdleTimeout:  15 * time.Minute,
			BlockNetwork: true,
		},
		Daytona: DaytonaConfig{AutoStop: 15 * time.Minute, NetworkBlockAll: true, NetworkAllowList: []string{}, Channel: DaytonaChannelAuto},
		Vercel:  VercelConfig{Runtime: "python3.13", Timeout: 45 * time.Minute},
		Kubernetes: KubernetesConfig{
			Image:         "debian:bookworm-slim",
			WorkspaceSize: 10 * Gibibyte,
			NodeSelector:  map[string]string{},
			Tolerations:   []string{},
			EgressAllow:   []string{},
			RunAsUser:     1000,
			MaxLifetime:   24 * time.Hour,
			Mode:          KubernetesModePod,
			StartTimeout:  5 * time.Minute,
		},
		Approvals: ApprovalsConfig{
			Mode:             ApprovalManual,
			Timeout:          300 * time.Second,
			CommandAllowlist: []string{},
		},
		Tools: ToolsConfig{ShellExecute: true, CodeExecution: true, FileWrite: true, FileSystem: true},
		Audit: AuditConfig{
			Enabled:        true,
			Level:          AuditFull,
			LogDestination: "~/.local/state/hermes-sandbox/audit.log",
			OnFailure:      AuditRefuse,
		},
		MCP: MCPConfig{Listen: "127.0.0.1:8765", MaxSessions: 32, SessionIdleTimeout: 15 * time.Minute,
			DrainTimeout: 30 * time.Second},
		Local: LocalConfig{Confine: ConfineAuto, EgressAllow: []string{}, DenyRead: DefaultDenyRead(),
			BranchMaxBytes: DefaultBranchMaxBytes},
		Secrets: SecretsConfig{Broker: BrokerList{}, Values: SecretValues{}},
		Egress:  EgressConfig{Hosts: map[string]string{}, AllowPrivate: []string{}},
	}
}

// Path returns the config file this Config was loaded from (or would have
// been, had it existed); "" for a Config from NewConfig.
func (c *Config) Path() string { return c.path }

// SecretsPath returns the secrets file beside Path; "" for a Config from NewConfig.
func (c *Config) SecretsPath() string { return c.secretsPath }

// FileLoaded reports whether the config file existed and was read.
func (c *Config) FileLoaded() bool { return c.fileLoaded }

// Fingerprint identifies the settings' values, secrets included, but not where they came
// from: two loads of unchanged settings have the same one.
func (c *Config) Fingerprint() string {
	v := *c
	v.env, v.origins, v.ignoreEnv = envMap{}, nil, nil
	h := sha256.New()
	fmt.Fprintf(h, "%#v", v) // a Secret prints as *** here…
	var secrets func(r reflect.Value)
	secrets = func(r reflect.Value) { // …so its value is added on its own
		switch {
		case r.Type() == reflect.TypeFor[Secret]():
			fmt.Fprintf(h, "\x00%d:%s", r.Len(), r.String())
		case r.Type() == reflect.TypeFor[SecretValues]():
			m := r.Interface().(SecretValues)
			for _, k := range slices.Sorted(maps.Keys(m)) {
				fmt.Fprintf(h, "\x00%d:%s=%d:%s", len(k), k, len(m[k]), m[k])
			}
		case r.Kind() == reflect.Struct:
			for i := range r.NumField() {
				if r.Type().Field(i).IsExported() {
					secrets(r.Field(i))
				}
			}
		}
	}
	secrets(reflect.ValueOf(v))
	return hex.EncodeToString(h.Sum(nil))
}

// StateDir returns terminal.state_dir with ~ expanded, or the default
// $XDG_STATE_HOME/hermes-sandbox (fallback ~/.local/state/hermes-sandbox)
// when it is empty. The XDG and HOME variables come from the environment
// given to Load, or the process environment for NewConfig.
func (c *Config) StateDir() string {
	lookup := c.env.lookup
	if c.env.m == nil {
		lookup = os.LookupEnv
	}
	home, _ := lookup("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if c.Terminal.StateDir != "" {
		return expandHomeWith(c.Terminal.StateDir, home)
	}
	if x, _ := lookup("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, appName)
	}
	return filepath.Join(home, ".local", "state", appName)
}

const appName = "hermes-sandbox"

// Source says where a setting's effective value came from.
type Source string

// Sources, from lowest to highest precedence.
const (
	SourceDefault Source = "default"
	SourceFile    Source = "file"    // config.yaml
	SourceSecrets Source = "secrets" // secrets.yaml
	SourceEnv     Source = "env"
	SourceFlag    Source = "flag" // SetValue
)

type origin struct {
	source Source
	file   string
	line   int
	env    string
}

// Source reports where key's effective value came from. Unknown keys and
// keys never set report SourceDefault.
func (c *Config) Source(key string) Source {
	if f, ok := lookupField(key); ok {
		if o, ok := c.origins[f.key]; ok {
			return o.source
		}
	}
	return SourceDefault
}

// Origin describes where key's effective value came from, for messages that must say so:
// "HERMES_SANDBOX_SSH_HOST", "TERMINAL_SSH_HOST in /home/u/.hermes/.env", "/home/u/.config/
// hermes-sandbox/config.yaml:12", "the command line", or "the default".
func (c *Config) Origin(key string) string {
	f, ok := lookupField(key)
	if !ok {
		return "the default"
	}
	o, ok := c.origins[f.key]
	switch {
	case !ok || o.source == SourceDefault:
		return "the default"
	case o.env != "":
		return o.env
	case o.file != "" && o.line > 0:
		return o.file + ":" + strconv.Itoa(o.line)
	case o.file != "":
		return o.file
	case o.source == SourceFlag:
		return "the command line"
	}
	return string(o.source)
}

// FromEnvironment lists the settings of sections (and terminal's) whose value comes from the
// environment, above the config files, as "key=value from ORIGIN" (secrets masked): what a
// user who ran config set may not expect to be in effect.
func (c *Config) FromEnvironment(sections ...string) []string {
	var out []string
	for _, f := range schema.fields {
		if f.section != "terminal" && !slices.Contains(sections, f.section) {
			continue
		}
		if o, ok := c.origins[f.key]; ok && o.source == SourceEnv {
			out = append(out, f.key+"="+formatValue(c.fieldValue(f))+" from "+c.Origin(f.key))
		}
	}
	return out
}

func (c *Config) setOrigin(key string, o origin) {
	if c.origins == nil {
		c.origins = map[string]origin{}
	}
	c.origins[key] = o
}

// ErrInvalid matches every *Error with errors.Is.
var ErrInvalid = errors.New("invalid configuration")

// Error is a configuration problem, located in a file (and line) or an env
// var when that is known. It matches ErrInvalid with errors.Is, and unwraps
// to its cause.
type Error struct {
	Op   string // "load config", "set config", "validate config", ...
	File string // file that holds the bad setting, if any
	Line int    // 1-based line in File; 0 if unknown
	Env  string // env var that holds the bad setting, if any
	Key  string // dotted key, if known
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	b.WriteString(": ")
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Env != "" {
		b.WriteString("env " + e.Env + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
