// Package vercel runs each session in its own Vercel Sandbox (a Firecracker microVM) through
// the Vercel Sandbox REST API, with a small typed client that follows the official SDK's
// routes and schemas. Each session maps to one uniquely named, persistent Vercel sandbox,
// tagged hermes-sandbox=1 with the session and owner; a later process finds it by name and
// resumes it when it has stopped, files kept. Commands, jobs and files run through the
// static sandbox-agent helper, uploaded once with fs/write and served over the session's
// interactive PTY WebSocket in raw mode: Vercel commands have no stdin, and the PTY is the
// only two-way stream the API offers.
package vercel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Name is the backend's registry name.
const Name = "vercel"

// Tags every sandbox of ours carries; gc and sessions list only sandboxes tagged so.
const (
	tagMarker  = "hermes-sandbox"
	tagSession = "hermes-session"
	tagOwner   = "hermes-owner"
)

// Options are settings a Go program (or a test) adds to the configuration.
type Options struct {
	// HTTPClient replaces the default HTTP client (tests, proxies).
	HTTPClient *http.Client
	// Tags are added to every sandbox the backend creates.
	Tags map[string]string
}

// Backend runs sessions in Vercel sandboxes of one team and project.
type Backend struct {
	opts  sandbox.FactoryOptions
	extra Options
	log   *slog.Logger
	api   *Client
	creds credentials
	set   settings
	shell string

	scope    string // hash of owner and state directory: separates users and state dirs
	owner    string
	records  sandbox.Records[record]
	spillDir string

	helperBin agentbin.Loader

	closed atomic.Bool
}

// New builds the vercel backend from its config section. It resolves the credentials but
// makes no request.
func New(cfg config.VercelConfig, opts sandbox.FactoryOptions) (sandbox.Backend, error) {
	return sandbox.AsBackend(NewWith(cfg, opts, Options{}))
}

// NewWith is New with extra options for Go callers.
func NewWith(cfg config.VercelConfig, opts sandbox.FactoryOptions, extra Options) (*Backend, error) {
	sc, err := sandbox.NewScope(opts.StateDir) // vercel's own scope also hashes the owner
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "configure", Err: err}
	}
	state := sc.Dir()
	creds, err := resolveCredentials(cfg, opts)
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "configure", Err: err}
	}
	set, err := resolveSettings(cfg)
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "configure", Err: err}
	}
	if len(set.allow) == 0 && len(opts.EgressAllow) > 0 {
		set.allow, set.leftOut = sharedDomains(opts.EgressAllow)
		set.fromShared = true
	}
	api, err := NewClient(cfg.APIURL, creds.token, creds.teamID, creds.project, extra.HTTPClient)
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "configure", Err: fmt.Errorf("%v: %w", err, sandbox.ErrInvalidConfig)}
	}
	owner := ownerName()
	sum := sha256.Sum256([]byte(owner + "\x00" + state))
	log := opts.Log().With("backend", Name)
	return &Backend{
		opts: opts, extra: extra, log: log, api: api, creds: creds, set: set,
		shell: opts.Shell, scope: hex.EncodeToString(sum[:])[:8], owner: owner,
		records:   sandbox.Records[record]{Dir: filepath.Join(state, "vercel", "sessions"), Ext: ".json", Logger: log},
		spillDir:  filepath.Join(state, "output"),
		helperBin: agentbin.Loader{CacheDir: state},
	}, nil
}

// ownerName is user@host, recorded in a tag so people can tell whose sandbox it is.
func ownerName() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// Name returns "vercel".
func (b *Backend) Name() string { return Name }

// Capabilities reports what vercel sessions do.
func (b *Backend) Capabilities() sandbox.Capabilities {
	iso := "Firecracker microVM (Vercel Sandbox); commands through the sandbox-agent helper over the interactive PTY WebSocket (raw mode)"
	if len(b.set.allow) == 0 {
		iso += "; network deny-all"
	} else {
		iso += "; network limited to " + strings.Join(b.set.allow, ", ")
	}
	return sandbox.Capabilities{Jobs: true, Files: true, Stdin: true, Persistent: true, Terminal: true, Branching: true,
		Isolation: iso, Network: len(b.set.allow) > 0}
}

// Warnings says when the configuration opens the network.
func (b *Backend) Warnings() []string {
	if len(b.set.allow) > 0 {
		key := "vercel.network_allow"
		if b.set.fromShared {
			key = "terminal.egress_allow (vercel.network_allow is empty)"
		}
		return []string{key + " lets commands reach " + strings.Join(b.set.allow, ", ")}
	}
	return nil
}

// Close marks the backend closed. Sandboxes stay (they stop at their timeout).
func (b *Backend) Close() error {
	b.closed.Store(true)
	return nil
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]`)

// sandboxName is the session's Vercel sandbox name: unique per owner and state directory,
// so a later process finds it again, and made of what any name allows.
func (b *Backend) sandboxName(session string) string {
	slug := unsafeName.ReplaceAllString(strings.ToLower(session), "-")
	if slug != session {
		sum := sha256.Sum256([]byte(session))
		slug += "-" + hex.EncodeToString(sum[:])[:6]
	}
	return "hermes-" + b.scope + "-" + slug
}

func (b *Backend) tags(session string) map[string]string {
	t := map[string]string{tagMarker: "1", tagSession: session, tagOwner: b.owner, "hermes-scope": b.scope}
	for k, v := range b.extra.Tags {
		t[k] = v
	}
	return t
}

// Open returns the named session. Nothing is created until its first command.
func (b *Backend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	if err := sandbox.CheckOpen(Name, name, b.closed.Load(), nil); err != nil {
		return nil, err
	}
	s := &session{b: b, name: name, stop: make(chan struct{})}
	s.Session = channel.New(channel.Options{Backend: Name, Name: name, Start: s.start, SpillDir: b.spillDir,
		Logger: b.opts.Logger, OnClose: s.onClose})
	return s, nil
}

// record is what this machine remembers about a session's sandbox.
type record struct {
	Sandbox string    `json:"sandbox"`
	Created time.Time `json:"created"`
	// Snapshots are the session's snapshots, newest last. A failed restore never removes one.
	Snapshots []string `json:"snapshots,omitempty"`
}

var (
	_ sandbox.Backend        = (*Backend)(nil)
	_ sandbox.SessionManager = (*Backend)(nil)
	_ sandbox.Checker        = (*Backend)(nil)
	_ sandbox.Warner         = (*Backend)(nil)
	_ sandbox.Baseliner      = (*Backend)(nil)
	_ sandbox.Collector      = (*Backend)(nil)
)
