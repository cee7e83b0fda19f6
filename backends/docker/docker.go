// Package docker runs each session in its own hardened container on a Docker engine, reached
// through the Engine API (never the docker CLI). A container is created per session with no
// network, a read-only root, every capability dropped, no-new-privileges, memory, CPU and pids
// limits, a non-root user and a writable /workspace volume. The static sandbox-agent helper is
// bind-mounted read-only and serves the session over one long-lived exec stream, so a command
// costs one round trip instead of a `docker exec`. Containers carry labels, so a later process
// finds its session again, `hermes-sandbox gc` reaps idle ones, and a warm pool
// (docker.pool_size) can hand out ready containers in milliseconds.
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Name is the backend's registry name.
const Name = "docker"

// Options are settings a Go program (or a test) can add to those from the configuration.
type Options struct {
	// Labels are added to every container and volume the backend creates.
	Labels map[string]string
	// EgressResolver resolves names for the egress proxy (docker.network allowlist); nil is
	// the system resolver. Tests map made-up names to local servers.
	EgressResolver egress.Resolver
	// EgressAllowLoopback lets allowed names resolve to this host's loopback (tests only).
	EgressAllowLoopback bool
	// Brokering is secrets.broker and the egress section (with docker.network allowlist).
	Brokering egress.Brokering
	// BuiltImage replaces config.BuiltDockerImage as the image run when docker.image is left
	// at its default and the engine lacks that default (tests name one of their own).
	BuiltImage string
}

// Backend runs sessions in containers on one Docker engine.
type Backend struct {
	opts  sandbox.FactoryOptions
	cfg   config.DockerConfig
	extra Options
	log   *slog.Logger
	owner string // this process, for labelOwner

	host    string // engine address, for messages
	source  string // where the address came from (docker.host, DOCKER_HOST, a context), for messages
	local   bool   // the engine runs on this machine (a unix socket)
	cli     *client.Client
	names   sandbox.Scope // session container names: separates state directories on one engine
	scope   string        // names.ID(), for labels and the names of pool and helper containers
	env     []string      // container environment (HOME, docker.env)
	passEnv []string      // passthrough values, given to each helper exec
	shell   string

	records  sandbox.Records[sandbox.IDRecord] // host-side session records: container id, mtime = last use
	spillDir string

	usersMu sync.Mutex
	users   *userIDs // guarded by usersMu; docker.user resolved in the image, once

	imageMu sync.Mutex
	imageOK string // guarded by imageMu; the image sessions run, once found (see resolveImage)

	prepMu sync.Mutex
	agent  *agentbin.Binary // guarded by prepMu; the helper binary, set once by prepare and never changed
	eng    engineInfo       // guarded by prepMu; set with agent

	poolOnce sync.Once
	pool     *pool

	diskOnce sync.Once
	diskErr  error // why docker.disk_limit cannot be enforced here (see diskUnenforced)

	disksSeenOnce sync.Once
	disksSeenErr  error // why the engine cannot see the disks this process mounts (see disksSeen)

	oomFile atomic.Int32 // index in oomFiles of the counter file that works here

	egressObs egress.Observer // receives the egress proxy's decisions (audit)

	bg sync.WaitGroup // ephemeral sandboxes being removed (removeLater); Close waits for them

	// ephemerals are the containers ephemeral sessions made or claimed and that are not yet
	// known to be removed (id → session): whatever path a session took, Close removes what
	// is left here (recycle.go).
	ephemerals map[string]string // guarded by mu

	mu     sync.Mutex
	closed bool // guarded by mu
}

// New builds the docker backend from its config section. It reads the engine address
// (docker.host, DOCKER_HOST, docker contexts) but does not contact the engine.
func New(cfg config.DockerConfig, opts sandbox.FactoryOptions) (sandbox.Backend, error) {
	return sandbox.AsBackend(NewWith(cfg, opts, Options{}))
}

// NewWith is New with extra options for Go callers.
func NewWith(cfg config.DockerConfig, opts sandbox.FactoryOptions, extra Options) (*Backend, error) {
	names, err := sandbox.NewScope(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	state := names.Dir()
	ep, err := resolveEndpoint(cfg.Host, opts)
	if err != nil {
		return nil, err
	}
	cli, err := newClient(ep)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		owner:    sandbox.ProcessOwner(),
		opts:     opts,
		cfg:      cfg,
		extra:    extra,
		log:      opts.Log().With("backend", Name),
		host:     ep.Host,
		source:   ep.source,
		local:    strings.HasPrefix(ep.Host, "unix://"),
		cli:      cli,
		names:    names,
		scope:    names.ID(),
		shell:    opts.Shell,
		spillDir: filepath.Join(state, "output"),
	}
	b.records = sandbox.Records[sandbox.IDRecord]{Dir: filepath.Join(state, "docker", "sessions"), Legacy: sandbox.BareID, Logger: b.log,
		TouchEvery: time.Second}
	b.env = containerEnv(b.cfg)
	b.passEnv = passthroughEnv(b.cfg, opts)
	return b, nil
}

// Name returns "docker".
func (b *Backend) Name() string { return Name }

// Capabilities reports what docker sessions do.
func (b *Backend) Capabilities() sandbox.Capabilities {
	iso := "container: namespaces, cgroups (memory, cpu, pids), all capabilities dropped, no-new-privileges, read-only root, non-root user"
	if b.cfg.Privileged {
		iso = "container: PRIVILEGED (full host device and capability access); namespaces only"
	}
	if b.cfg.Runtime != "" {
		iso += ", runtime " + b.cfg.Runtime
	}
	if e := b.engine(); e.podman {
		iso += ", engine " + e.product
	}
	switch b.network() {
	case config.NetworkAllowlist:
		iso += ", egress only to allowlisted hosts through this tool's proxy"
	case config.NetworkNone:
		iso += ", no network"
	}
	return sandbox.Capabilities{Jobs: true, Files: true, Terminal: true, Stdin: true, Persistent: true,
		Isolation: iso, Network: b.network() != config.NetworkNone, Branching: true}
}

// Close stops the warm pool and removes its unclaimed containers. Sessions' containers stay.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	p := b.pool
	b.mu.Unlock()
	b.bg.Wait()
	var err error
	if p != nil {
		err = p.close()
	}
	b.removeEphemerals()
	return errors.Join(err, b.cli.Close())
}

func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// containerName is the session's container name: it finds the session again from any process
// using the same state directory.
func (b *Backend) containerName(session string) string { return b.names.Name(session) }

// sessionOf returns the session name of one of our container names ("" for pool containers
// and other scopes).
func (b *Backend) sessionOf(name string) string { return b.names.Session(name) }

// WorkDir is the session's working tree, the workspace volume (docker.cwd, else /workspace):
// what commands delete there is the agent's own.
func (b *Backend) WorkDir() string { return workdir(b.cfg) }

// Open returns the named session. Nothing is created until its first command: then the
// session's container is found again, claimed from the warm pool or created.
func (b *Backend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	return b.open(name, false)
}

// open opens the named session; an ephemeral one is disposed of when it closes (recycle.go).
func (b *Backend) open(name string, ephemeral bool) (sandbox.Session, error) {
	if err := sandbox.CheckOpen(Name, name, b.isClosed(), b.validate); err != nil {
		return nil, err
	}
	pass, err := b.sessionEnv(name) // secrets.go
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "open", ID: name, Err: err}
	}
	b.startPool()
	s := &session{b: b, name: name, ephemeral: ephemeral}
	s.Session = channel.New(channel.Options{Backend: Name, Name: name, Start: s.start,
		SpillDir: b.spillDir, Logger: b.opts.Logger, OnClose: func() error { s.stopEgress(); s.dispose(); return nil },
		Detach: s.detach, Passthrough: pass})
	return s, nil
}

// forget drops the session's record and what is kept beside it.
func (b *Backend) forget(session string) {
	b.records.Drop(session)
	os.Remove(b.cwdPath(session))
	os.Remove(b.overridePath(session)) // a live allowlist change ends with its session
	b.forgetBroker(session)            // secrets.go
}

// cwdPath is where a session's last working directory is kept, beside the records.
func (b *Backend) cwdPath(session string) string {
	return filepath.Join(filepath.Dir(b.records.Dir), "cwd", session)
}

// writeCwd and readCwd keep a session's last working directory beside its record.
func (b *Backend) writeCwd(session, cwd string) {
	if err := os.MkdirAll(filepath.Dir(b.cwdPath(session)), 0o700); err == nil {
		_ = os.WriteFile(b.cwdPath(session), []byte(cwd), 0o600)
	}
}

func (b *Backend) readCwd(session string) string {
	data, _ := os.ReadFile(b.cwdPath(session))
	return string(data)
}

var (
	_ sandbox.Backend        = (*Backend)(nil)
	_ sandbox.SessionManager = (*Backend)(nil)
	_ sandbox.Checker        = (*Backend)(nil)
	_ sandbox.Warner         = (*Backend)(nil)
	_ sandbox.Baseliner      = (*Backend)(nil)
	_ sandbox.Workspace      = (*Backend)(nil)
	_ sandbox.ImageManager   = (*Backend)(nil)
	_ sandbox.Collector      = (*Backend)(nil)
	_ sandbox.EgressReporter = (*Backend)(nil)
	_ sandbox.EgressObserver = (*Backend)(nil)
)
