// Package modal runs each session in its own Modal Sandbox, through Modal's official Go SDK.
// A sandbox is named after the state directory's scope and the session and tagged, so a later
// CLI process finds it again; its lifetime (modal.timeout) and idle timeout are always set, and
// a sandbox that ended is recreated on the next command, which then reports
// environment_recreated. The static sandbox-agent helper is uploaded through the SDK's
// filesystem API and serves the session over one long-lived Exec's stdin and stdout, so
// commands stream, keep their cwd and env, and time out by killing their process tree inside
// the sandbox (Modal has no exec kill); where the helper cannot start, each command is one
// Exec with its shell state kept in a file.
package modal

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Name is the backend's registry name.
const Name = "modal"

// Tags every sandbox of ours carries.
const (
	tagOurs    = "hermes-sandbox"
	tagSession = "hermes-sandbox.session"
	tagOwner   = "hermes-sandbox.owner" // host/scope of the state directory that made it
)

// Options are settings a Go program (or a test) adds to the configuration.
type Options struct {
	// Tags are added to every sandbox the backend creates.
	Tags map[string]string
	// ImageBuilderVersion, if set, skips asking the server for it.
	ImageBuilderVersion string
	// HelperArch is the architecture of the helper to upload ("" = amd64, Modal's machines).
	HelperArch string
}

// Backend runs sessions in Modal Sandboxes of one app.
type Backend struct {
	opts  sandbox.FactoryOptions
	cfg   config.ModalConfig
	extra Options
	log   *slog.Logger

	creds    Credentials
	credsErr error
	scope    sandbox.Scope
	owner    string // host/scope
	shell    string
	cwd      string
	passEnv  map[string]string

	records  sandbox.Records[record]
	spillDir string

	mu             sync.Mutex
	client         *modalsdk.Client // guarded by mu
	app            *modalsdk.App    // guarded by mu
	built          *modalsdk.Image  // guarded by mu; the configured image, built once
	fallbackReason string           // guarded by mu; set once a session could not start the helper
	closed         bool             // guarded by mu

	helper agentbin.Loader
}

// New builds the modal backend from its config section. It resolves credentials but
// contacts nobody.
func New(cfg config.ModalConfig, opts sandbox.FactoryOptions) (sandbox.Backend, error) {
	return sandbox.AsBackend(NewWith(cfg, opts, Options{}))
}

// NewWith is New with extra options for Go callers and tests.
func NewWith(cfg config.ModalConfig, opts sandbox.FactoryOptions, extra Options) (*Backend, error) {
	scope, err := sandbox.NewScope(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("modal: %w", err)
	}
	state := scope.Dir()
	host, _ := os.Hostname()
	b := &Backend{
		opts:     opts,
		cfg:      cfg,
		extra:    extra,
		log:      opts.Log().With("backend", Name),
		scope:    scope,
		owner:    host + "/" + scope.ID(),
		shell:    cmp.Or(opts.Shell, "auto"),
		cwd:      opts.RemoteCwd(workdir),
		passEnv:  opts.PassthroughMap(),
		spillDir: filepath.Join(state, "output"),
	}
	b.records = sandbox.Records[record]{Dir: filepath.Join(state, "modal", "sessions"), Ext: ".json", Logger: b.log, TouchEvery: time.Second}
	b.helper.CacheDir = state
	b.creds, b.credsErr = ResolveCredentials(cfg, opts)
	return b, nil
}

// workdir is where sessions start and the directory that is the agent's own (created at
// the helper's start): the whole sandbox is private, and this is its working tree.
const workdir = "/workspace"

// WorkDir is the sandbox's working tree (sandbox.Workspace).
func (b *Backend) WorkDir() string { return b.cwd }

// Name returns "modal".
func (b *Backend) Name() string { return Name }

// Capabilities reports what modal sessions do.
func (b *Backend) Capabilities() sandbox.Capabilities {
	iso := "Modal Sandbox (gVisor container on Modal's cloud)"
	if b.cfg.GPU != "" {
		iso += ", GPU " + b.cfg.GPU
	}
	return sandbox.Capabilities{Jobs: true, Files: true, Terminal: true, Stdin: true, Persistent: true, Branching: true,
		Isolation: iso, Network: !b.cfg.BlockNetwork}
}

// Close closes the SDK client. Sandboxes stay until their timeouts or `sessions rm`.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.client != nil {
		b.client.Close()
	}
	return nil
}

func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// sdk returns the SDK client, made on first use.
func (b *Backend) sdk() (*modalsdk.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, &sandbox.Error{Backend: Name, Op: "connect", Err: sandbox.ErrClosed}
	}
	if b.client != nil {
		return b.client, nil
	}
	if b.credsErr != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "credentials", Err: b.credsErr}
	}
	c, err := newSDKClient(b.creds, b.extra.ImageBuilderVersion, b.log)
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "connect", Err: b.classify(err)}
	}
	b.client = c
	return c, nil
}

// sandboxName is the session's sandbox name: unique per state directory and session, made
// only of [a-zA-Z0-9-_.] and at most 64 characters.
func (b *Backend) sandboxName(session string) string {
	n := b.scope.Name(session)
	if len(n) <= 64 {
		return n
	}
	sum := sha256.Sum256([]byte(session))
	return b.scope.Name(session[:38] + "-" + hex.EncodeToString(sum[:])[:8])
}

// Open returns the named session. Nothing is created until its first command.
func (b *Backend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	valid := func() error {
		if err := validate(b.cfg); err != nil {
			return err
		}
		return b.credsErr
	}
	if err := sandbox.CheckOpen(Name, name, b.isClosed(), valid); err != nil {
		return nil, err
	}
	s := &session{b: b, name: name}
	s.Session = channel.New(channel.Options{Backend: Name, Name: name, Start: s.start,
		SpillDir: b.spillDir, Logger: b.opts.Logger, OnClose: s.onClose, Passthrough: b.passEnv})
	return s, nil
}

// record is what this state directory remembers about a session.
type record struct {
	SandboxID string    `json:"sandbox_id"`
	Snapshot  string    `json:"snapshot_image_id,omitempty"`
	Created   time.Time `json:"created"`
	Mode      string    `json:"mode,omitempty"` // "helper" or "exec" (the fallback)
}

var (
	_ sandbox.Backend        = (*Backend)(nil)
	_ sandbox.SessionManager = (*Backend)(nil)
	_ sandbox.Checker        = (*Backend)(nil)
	_ sandbox.Warner         = (*Backend)(nil)
	_ sandbox.Baseliner      = (*Backend)(nil)
	_ sandbox.Collector      = (*Backend)(nil)
	_ sandbox.Workspace      = (*Backend)(nil)
)
