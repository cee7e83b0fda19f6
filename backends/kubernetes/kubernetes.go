// Package kubernetes runs each session in its own hardened pod on a cluster the user already
// has, through client-go. The cluster is found as kubectl finds it (kubernetes.kubeconfig,
// $KUBECONFIG, ~/.kube/config, else the in-cluster service account). A session's pod meets
// the Pod Security "restricted" profile and more (non-root uid, read-only root, no
// capabilities, RuntimeDefault seccomp, no service-account token, size-limited emptyDirs for
// the workspace and /tmp, a lifetime), and unless kubernetes.network is open a deny-all
// egress NetworkPolicy selects it (with allowlist, a relay carries connections to this
// tool's filtering proxy: egress.go). The static sandbox-agent helper is uploaded through one
// pod exec's stdin into the pod's own emptyDir and then serves the session over one
// long-lived exec (WebSocket v5, else SPDY), so commands stream, keep their cwd and env,
// and time out by killing their process tree inside the pod; per-command latency is the
// cluster round trip, not an exec. A pod that was evicted, deleted or ran out its lifetime
// is recreated on the next command, which reports environment_recreated.
package kubernetes

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Name is the backend's registry name.
const Name = "kubernetes"

// Labels and annotations on everything the backend creates.
const (
	labelOurs    = "hermes-sandbox"         // "1"
	labelScope   = "hermes-sandbox/scope"   // the state directory's scope
	labelSession = "hermes-sandbox/session" // a hash of the session name (names need not be label values)
	labelOwner   = "hermes-sandbox/owner"   // the host that made it
	labelPool    = "hermes-sandbox/pool"    // "ready" on an unclaimed warm pod
	labelEgress  = "hermes-sandbox/egress"  // "deny" where the deny-all policy applies
	labelSpec    = "hermes-sandbox/spec"    // on a warm pod: the hash of the spec it was made with

	annoSession = "hermes-sandbox/session-name"
	annoCreator = "hermes-sandbox/created-by" // host/pid
	// annoOwnerProcess is sandbox.ProcessOwner of a process that removes its sessions when
	// done (FactoryOptions.Ephemeral: an MCP server): gc removes the pod once it is gone.
	annoOwnerProcess = "hermes-sandbox/owner-process"
	annoUsed         = "hermes-sandbox/used" // RFC 3339, refreshed at most once a minute
)

// Paths inside the pod: each is an emptyDir, so they are writable under a read-only root.
const (
	workdir     = "/workspace"
	hermesDir   = "/.hermes-sandbox"
	helperState = hermesDir + "/state"
	tmpDir      = "/tmp"
	// containerName is the pod's one container.
	containerName = "sandbox"
)

// Options are settings a Go program (or a test) adds to the configuration.
type Options struct {
	// Labels are added to every object the backend creates.
	Labels map[string]string
	// EgressResolver resolves names for the egress proxy (kubernetes.network allowlist); nil
	// is the system resolver. Tests map made-up names to local servers.
	EgressResolver egress.Resolver
	// EgressAllowLoopback lets allowed names resolve to this host's loopback (tests only).
	EgressAllowLoopback bool
	// Egress is the egress section (egress.hosts, egress.allow_private) and the brokered
	// secrets (secrets.broker) for the proxy, with kubernetes.network allowlist (secrets.go).
	Egress egress.Brokering
	// WaitReport is how often a start that waits says why (0 = sandbox.DefaultWaitReport).
	WaitReport time.Duration
}

// Backend runs sessions in pods of one namespace.
type Backend struct {
	opts  sandbox.FactoryOptions
	cfg   config.KubernetesConfig
	extra Options
	log   *slog.Logger

	scope   sandbox.Scope
	host    string
	owner   string // label-safe host
	process string // annoOwnerProcess for this process's sessions; "" unless Ephemeral
	shell   string
	cwd     string
	passEnv map[string]string

	spillDir string
	records  sandbox.Records[sandbox.IDRecord] // the session's pod UID

	mu        sync.Mutex
	conn      *conn  // guarded by mu
	connErr   error  // guarded by mu
	closed    bool   // guarded by mu
	rcChecked bool   // guarded by mu; kubernetes.runtime_class was found on the cluster
	version   string // guarded by mu; the server's, once Check asked

	warmPoolReady bool // guarded by mu; the SandboxTemplate and SandboxWarmPool are in place

	spdyOnly atomic.Bool // exec over WebSocket was refused once: use SPDY

	helper agentbin.Loader

	egressObs egress.Observer // receives the egress proxy's decisions (audit)
}

// conn is what talking to the cluster needs.
type conn struct {
	rest      *rest.Config
	api       *clients
	dynamic   dynamic.Interface
	namespace string
	source    string // where the configuration came from, for doctor
	server    string
}

// New builds the kubernetes backend from its config section. It reads kubeconfig but
// contacts nobody.
func New(cfg config.KubernetesConfig, opts sandbox.FactoryOptions) (sandbox.Backend, error) {
	return sandbox.AsBackend(NewWith(cfg, opts, Options{}))
}

// NewWith is New with extra options for Go callers and tests.
func NewWith(cfg config.KubernetesConfig, opts sandbox.FactoryOptions, extra Options) (*Backend, error) {
	scope, err := sandbox.NewScope(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	host, _ := os.Hostname()
	b := &Backend{
		opts:     opts,
		cfg:      cfg,
		extra:    extra,
		log:      opts.Log().With("backend", Name),
		scope:    scope,
		host:     host,
		owner:    labelSafe(host),
		shell:    cmp.Or(opts.Shell, "auto"),
		cwd:      opts.RemoteCwd(workdir),
		passEnv:  opts.PassthroughMap(),
		spillDir: filepath.Join(scope.Dir(), "output"),
	}
	b.records = sandbox.Records[sandbox.IDRecord]{Dir: filepath.Join(scope.Dir(), "kubernetes", "sessions"), Legacy: sandbox.BareID, Logger: b.log}
	b.helper.CacheDir = scope.Dir()
	if opts.Ephemeral {
		b.process = sandbox.ProcessOwner()
	}
	b.conn, b.connErr = connect(cfg, opts)
	routeKlog(b.log)
	return b, nil
}

// connect reads the cluster's configuration the way kubectl does.
func connect(cfg config.KubernetesConfig, opts sandbox.FactoryOptions) (*conn, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	source := "~/.kube/config"
	if v, ok := opts.Getenv("KUBECONFIG"); ok && v != "" {
		rules.Precedence = filepath.SplitList(v)
		source = "$KUBECONFIG (" + v + ")"
	} else if home, ok := opts.Getenv("HOME"); ok && home != "" {
		rules.Precedence = []string{filepath.Join(home, ".kube", "config")}
	} else {
		rules.Precedence = nil // only the caller's environment counts, not this process's
	}
	rules.ExplicitPath = ""
	if cfg.Kubeconfig != "" {
		p := cfg.Kubeconfig
		if strings.HasPrefix(p, "~/") {
			if home, ok := opts.Getenv("HOME"); ok {
				p = filepath.Join(home, p[2:])
			}
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w (%w)", p, err, sandbox.ErrInvalidConfig)
		}
		rules.ExplicitPath = p
		source = p
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: cfg.Context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	if cfg.Context != "" {
		if raw, err := cc.RawConfig(); err == nil && raw.Contexts[cfg.Context] == nil {
			have := slices.Sorted(maps.Keys(raw.Contexts))
			return nil, fmt.Errorf("kubernetes.context %q: no such context in %s (it has: %s): %w", cfg.Context, source, strings.Join(have, ", "), sandbox.ErrInvalidConfig)
		}
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		// No kubeconfig at all: inside a cluster, its service account.
		if clientcmd.IsEmptyConfig(err) && cfg.Kubeconfig == "" && cfg.Context == "" {
			if irc, ierr := rest.InClusterConfig(); ierr == nil {
				return finishConn(irc, cfg, inClusterNamespace(), "the in-cluster service account")
			}
			return nil, fmt.Errorf("no cluster configured: no kubeconfig (kubernetes.kubeconfig, $KUBECONFIG, ~/.kube/config) "+
				"and not running in a pod; point kubernetes.kubeconfig at one: %w", sandbox.ErrInvalidConfig)
		}
		return nil, fmt.Errorf("kubeconfig from %s: %v: %w", source, err, sandbox.ErrInvalidConfig)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	return finishConn(rc, cfg, ns, source)
}

func finishConn(rc *rest.Config, cfg config.KubernetesConfig, ns, source string) (*conn, error) {
	if cfg.Namespace != "" {
		ns = cfg.Namespace
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "hermes-sandbox"
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	api, err := newClients(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %v: %w", err, sandbox.ErrInvalidConfig)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %v: %w", err, sandbox.ErrInvalidConfig)
	}
	return &conn{rest: rc, api: api, dynamic: dyn, namespace: ns, source: source, server: rc.Host}, nil
}

func inClusterNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return "default"
	}
	return strings.TrimSpace(string(b))
}

// Name returns "kubernetes".
func (b *Backend) Name() string { return Name }

// WorkDir is the pod's working tree (sandbox.Workspace).
func (b *Backend) WorkDir() string { return b.cwd }

// Capabilities reports what kubernetes sessions do.
func (b *Backend) Capabilities() sandbox.Capabilities {
	iso := "Kubernetes pod (restricted Pod Security profile"
	if b.cfg.RuntimeClass != "" {
		iso += ", RuntimeClass " + b.cfg.RuntimeClass
	}
	iso += ")"
	return sandbox.Capabilities{Jobs: true, Files: true, Terminal: true, Stdin: true, Persistent: true,
		Isolation: iso, Network: b.network() != config.NetworkNone}
}

// Close forgets the client. Pods stay until their lifetime, `sessions rm` or gc.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// cluster returns the connection, or why there is none.
func (b *Backend) cluster() (*conn, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, &sandbox.Error{Backend: Name, Op: "connect", Err: sandbox.ErrClosed}
	}
	if b.connErr != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "kubeconfig", Err: b.connErr}
	}
	return b.conn, nil
}

// Open returns the named session; its pod is found or made on first use.
func (b *Backend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "open", ID: name, Err: err}
	}
	if _, err := b.cluster(); err != nil {
		return nil, err
	}
	pass, err := b.sessionEnv(name) // secrets.go
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "open", ID: name, Err: err}
	}
	s := &session{b: b, name: name}
	s.Session = channel.New(channel.Options{
		Backend:  Name,
		Name:     name,
		Start:    s.start,
		SpillDir: b.spillDir,
		Logger:   b.log,
		// The caller's current passthrough values, and the brokered secrets' placeholders,
		// at every command.
		Passthrough: pass,
		OnClose:     s.onClose,
	})
	return s, nil
}

// sessionHash is the session's label value: names may end in '.' or '_', which labels may not.
func (b *Backend) sessionHash(session string) string {
	sum := sha256.Sum256([]byte(b.scope.ID() + "/" + session))
	return hex.EncodeToString(sum[:])[:16]
}

var (
	notDNS   = regexp.MustCompile(`[^a-z0-9-]+`)
	notLabel = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
)

// podName is the session's pod (and Sandbox) name: a DNS label, unique per scope and session.
func (b *Backend) podName(session string) string {
	base := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(session), "-"), "-")
	if len(base) > 30 {
		base = strings.Trim(base[:30], "-")
	}
	if base == "" {
		base = "s"
	}
	return "hermes-" + b.scope.ID() + "-" + base + "-" + b.sessionHash(session)[:6]
}

// labelSafe turns s into a label value (at most 63 of [A-Za-z0-9._-], alphanumeric ends).
func labelSafe(s string) string {
	s = notLabel.ReplaceAllString(s, "-")
	if len(s) > 63 {
		s = s[:63]
	}
	s = strings.Trim(s, "-._")
	if s == "" {
		return "unknown"
	}
	return s
}

var (
	_ sandbox.Backend   = (*Backend)(nil)
	_ sandbox.Workspace = (*Backend)(nil)
)

// klogTarget is where client-go's own log lines (klog, which writes to stderr by default) go:
// the newest backend's logger, never the user's terminal between a command's output. klog's
// logger may only be set before any client-go goroutine runs, so it is set once, at init, to
// a handler that forwards to this.
var klogTarget atomic.Pointer[slog.Logger]

func init() {
	klog.SetSlogLogger(slog.New(klogForward{}))
}

func routeKlog(log *slog.Logger) { klogTarget.Store(log.With("component", "client-go")) }

// klogForward is a slog.Handler passing records to klogTarget (dropping them while unset).
type klogForward struct {
	attrs []slog.Attr
	group string
}

func (h klogForward) target() slog.Handler {
	l := klogTarget.Load()
	if l == nil {
		return slog.DiscardHandler
	}
	t := l.Handler()
	if h.group != "" {
		t = t.WithGroup(h.group)
	}
	if len(h.attrs) > 0 {
		t = t.WithAttrs(h.attrs)
	}
	return t
}

func (h klogForward) Enabled(ctx context.Context, l slog.Level) bool {
	return h.target().Enabled(ctx, l)
}

func (h klogForward) Handle(ctx context.Context, r slog.Record) error {
	return h.target().Handle(ctx, r)
}

func (h klogForward) WithAttrs(attrs []slog.Attr) slog.Handler {
	return klogForward{attrs: append(slices.Clone(h.attrs), attrs...), group: h.group}
}

func (h klogForward) WithGroup(name string) slog.Handler {
	g := name
	if h.group != "" {
		g = h.group + "." + name
	}
	return klogForward{attrs: h.attrs, group: g}
}
