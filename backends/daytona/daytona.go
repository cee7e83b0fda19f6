// Package daytona runs each session in its own Daytona sandbox, reached through Daytona's
// REST control plane and the toolbox API inside each sandbox. A sandbox is named after the
// session and this tool's scope and labelled, so a later CLI process finds it again; it
// hibernates (stops) after daytona.auto_stop of idleness and is started again, files intact,
// by the next command. Commands, jobs and files go over the static sandbox-agent helper,
// uploaded once per sandbox and spoken to over the toolbox's PTY WebSocket switched to raw
// mode, so a command costs one round trip instead of a toolbox request.
package daytona

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
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Name is the backend's registry name.
const Name = "daytona"

// DefaultAPIURL is where the control plane lives unless daytona.api_url or DAYTONA_API_URL
// says otherwise.
const DefaultAPIURL = "https://app.daytona.io/api"

// Labels this tool puts on its sandboxes. gc and sessions touch only sandboxes labelled
// labelOurs=1 in this scope.
const (
	labelOurs    = "hermes-sandbox"
	labelSession = "hermes-sandbox.session"
	labelOwner   = "hermes-sandbox.owner"
	labelScope   = "hermes-sandbox.scope"
)

// Options are settings a Go program (or a test) can add to those from the configuration.
type Options struct {
	// HTTPClient replaces the default client (tests, proxies).
	HTTPClient *http.Client
	// Labels are added to every sandbox the backend creates.
	Labels map[string]string
	// PollInterval is how often a state change is polled (default 500ms).
	PollInterval time.Duration
	// StateTimeout bounds the wait for a sandbox to reach a usable state (default 5m).
	StateTimeout time.Duration
	// HelperBinary, when set, is uploaded instead of the built helper (tests: a helper that
	// cannot run, as one built for another machine).
	HelperBinary []byte
	// CallerBeat and CallerSilence: over toolbox sessions, how often a running command's
	// caller says it is alive, and how long (whole seconds) the sandbox waits without a word
	// before it kills the command (defaults agent.BeatEvery and agent.BeatTimeout).
	CallerBeat    time.Duration
	CallerSilence time.Duration
}

// Backend runs sessions in Daytona sandboxes.
type Backend struct {
	opts  sandbox.FactoryOptions
	cfg   config.DaytonaConfig
	extra Options
	log   *slog.Logger

	api       *apiClient
	apiURL    string
	keySource string // where the API key came from, for messages
	scope     string // hash of owner and state directory: one user's sandboxes on one machine
	owner     string // user@host, a label value

	records  sandbox.Records[record]
	spillDir string

	helperBin agentbin.Loader
	agentMu   sync.Mutex
	started   map[string]string // guarded by agentMu; sandbox id → the shell line that started its helper
	homes     map[string]string // guarded by agentMu; sandbox id → its user's home directory

	mu       sync.Mutex
	closed   bool   // guarded by mu
	fbReason string // guarded by mu; why a session fell back to toolbox sessions (daytona.channel: auto)
}

// New builds the daytona backend from its config section. It contacts nothing.
func New(cfg config.DaytonaConfig, opts sandbox.FactoryOptions) (sandbox.Backend, error) {
	return NewWith(cfg, opts, Options{})
}

// NewWith is New with extra options for Go callers.
func NewWith(cfg config.DaytonaConfig, opts sandbox.FactoryOptions, extra Options) (*Backend, error) {
	sc, err := sandbox.NewScope(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("daytona: %w", err)
	}
	state := sc.Dir()
	apiURL := strings.TrimRight(cfg.APIURL, "/")
	if apiURL == "" {
		if v, ok := opts.Getenv("DAYTONA_API_URL"); ok && v != "" {
			apiURL = strings.TrimRight(v, "/")
		} else {
			apiURL = DefaultAPIURL
		}
	}
	key := cfg.APIKey.Reveal()
	if key == "" {
		key, _ = opts.Getenv("DAYTONA_API_KEY")
	}
	hc := extra.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport}
	}
	if extra.PollInterval <= 0 {
		extra.PollInterval = 500 * time.Millisecond
	}
	if extra.StateTimeout <= 0 {
		extra.StateTimeout = 5 * time.Minute
	}
	if extra.CallerBeat <= 0 {
		extra.CallerBeat = agent.BeatEvery
	}
	if extra.CallerSilence < time.Second {
		extra.CallerSilence = agent.BeatTimeout
	}
	owner := ownerName()
	// The scope hashes the owner as well as the state directory: sandbox names are unique
	// per organisation, which many machines share.
	sum := sha256.Sum256([]byte(owner + "\x00" + state))
	b := &Backend{
		opts:      opts,
		cfg:       cfg,
		extra:     extra,
		log:       opts.Log().With("backend", Name),
		api:       &apiClient{base: apiURL, key: key, org: cfg.OrganizationID, hc: hc, retry: defaultRetry},
		apiURL:    apiURL,
		keySource: keySource(key, opts),
		scope:     hex.EncodeToString(sum[:])[:10],
		owner:     owner,
		spillDir:  filepath.Join(state, "output"),
		started:   map[string]string{},
		homes:     map[string]string{},
	}
	b.records = sandbox.Records[record]{Dir: filepath.Join(state, "daytona", "sessions"), Legacy: legacyRecord, Logger: b.log}
	b.helperBin.CacheDir = state
	return b, nil
}

// keySource says where the API key came from, for error messages. The configuration takes
// secrets.yaml first, then HERMES_SANDBOX_DAYTONA_API_KEY, then DAYTONA_API_KEY; a value equal
// to one of those variables came from it.
func keySource(key string, opts sandbox.FactoryOptions) string {
	for _, name := range []string{"HERMES_SANDBOX_DAYTONA_API_KEY", "DAYTONA_API_KEY"} {
		if v, ok := opts.Getenv(name); ok && v != "" && v == key {
			return "from " + name
		}
	}
	return "from secrets.yaml (daytona.api_key)"
}

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9._@-]+`)

// ownerName is user@host, the owner label of the sandboxes this process creates.
func ownerName() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return labelUnsafe.ReplaceAllString(name+"@"+host, "_")
}

// Name returns "daytona".
func (b *Backend) Name() string { return Name }

// Modes: how commands reach a sandbox (session records, sessions list, doctor).
const (
	modeHelper  = "helper"  // the sandbox-agent helper over the toolbox PTY WebSocket
	modeSession = "session" // one toolbox process session per command (the fallback)
)

// sessionsOnly reports whether commands go through toolbox process sessions, and why:
// daytona.channel says so, or (auto) a session found that the helper cannot run.
func (b *Backend) sessionsOnly() (bool, string) {
	if b.cfg.Channel == config.DaytonaChannelSession {
		return true, "daytona.channel is session"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fbReason != "", b.fbReason
}

// noteFallback records, once per backend, that a session's helper cannot run.
func (b *Backend) noteFallback(session, reason string) {
	b.mu.Lock()
	first := b.fbReason == ""
	b.fbReason = reason
	b.mu.Unlock()
	if first {
		b.log.Warn("the sandbox helper cannot run; each command runs in a toolbox process session of its own", "session", session, "reason", reason)
	}
}

// Capabilities reports what daytona sessions do. Over toolbox sessions there is no terminal
// and no background jobs; files go through the toolbox file API and stdin is uploaded before
// the command.
func (b *Backend) Capabilities() sandbox.Capabilities {
	iso := "Daytona sandbox (a container or VM on Daytona's runners); commands over the sandbox-agent helper on the toolbox PTY WebSocket"
	fb, why := b.sessionsOnly()
	if fb {
		iso = "Daytona sandbox (a container or VM on Daytona's runners); commands as toolbox process sessions, one per command (" + why + ")"
	}
	if b.cfg.NetworkBlockAll {
		iso += ", network blocked"
		if len(b.cfg.NetworkAllowList) > 0 {
			iso += " except " + strings.Join(b.cfg.NetworkAllowList, ",")
		}
	}
	return sandbox.Capabilities{Jobs: !fb, Files: true, Stdin: true, Persistent: true, Terminal: !fb, Branching: true,
		Isolation: iso, Network: !b.cfg.NetworkBlockAll || len(b.cfg.NetworkAllowList) > 0}
}

// Describe says where the API key comes from, the API address and the command channel, for
// doctor.
func (b *Backend) Describe() string {
	ch := string(b.cfg.Channel)
	switch fb, why := b.sessionsOnly(); {
	case b.cfg.Channel == config.DaytonaChannelSession:
		ch += " (each command a toolbox process session)"
	case fb:
		ch += " (toolbox process sessions: " + why + ")"
	case b.cfg.Channel == config.DaytonaChannelHelper:
		ch += " (the helper over the toolbox PTY WebSocket only)"
	default:
		ch += " (the helper over the toolbox PTY WebSocket; toolbox process sessions where it cannot run)"
	}
	key := "none"
	if b.api.key != "" {
		key = b.keySource
	}
	return fmt.Sprintf("api %s; key %s; channel %s", b.apiURL, key, ch)
}

// Close marks the backend closed. Sandboxes stay (they stop on their own after auto_stop).
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// sandboxName is the session's sandbox name, unique per scope and session within an
// organisation.
func (b *Backend) sandboxName(session string) string {
	return "hermes-" + b.scope + "-" + session
}

// labels are the labels of the session's sandbox.
func (b *Backend) labels(session string) map[string]string {
	l := map[string]string{labelOurs: "1", labelSession: session, labelOwner: b.owner, labelScope: b.scope}
	for k, v := range b.extra.Labels {
		l[k] = v
	}
	return l
}

// ours reports whether a sandbox was created by this tool in this scope for session.
func (b *Backend) ours(sb sandboxInfo, session string) bool {
	return sb.Labels[labelOurs] == "1" && sb.Labels[labelScope] == b.scope && sb.Labels[labelSession] == session
}

// validate checks what must be right before any request.
func (b *Backend) validate() error {
	if b.api.key == "" {
		return fmt.Errorf("no Daytona API key: run `hermes-sandbox setup daytona`, or set DAYTONA_API_KEY: %w", sandbox.ErrInvalidConfig)
	}
	if b.cfg.AutoStop < time.Minute {
		return fmt.Errorf("daytona.auto_stop is %s: it must be at least 1m, or idle sandboxes never stop: %w", b.cfg.AutoStop, sandbox.ErrInvalidConfig)
	}
	return nil
}

// Open returns the named session. Nothing is contacted until its first command: then the
// session's sandbox is found again (started if it hibernated) or created.
func (b *Backend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	if err := sandbox.CheckOpen(Name, name, b.isClosed(), b.validate); err != nil {
		return nil, err
	}
	s := &session{b: b, name: name, gone: make(chan struct{})}
	if b.cfg.Channel == config.DaytonaChannelSession {
		s.fallback = "daytona.channel is session"
	}
	s.Session = channel.New(channel.Options{Backend: Name, Name: name, Start: s.start,
		SpillDir: b.spillDir, Logger: b.opts.Logger, Passthrough: b.passthrough()})
	return s, nil
}

// A record remembers, in the state directory, the sandbox a session last used, so a later
// process can tell a sandbox that was destroyed (recreate, and say so) from one that never
// existed, and, once a command ran, how its commands run.
type record struct {
	ID   string `json:"sandbox_id"`
	Mode string `json:"mode,omitempty"`
}

// legacyRecord reads a record written before records were JSON: the sandbox id on its first
// line, the mode on its second.
func legacyRecord(data []byte) (record, bool) {
	id, mode, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	r := record{ID: strings.TrimSpace(id), Mode: strings.TrimSpace(mode)}
	return r, r.ID != ""
}

// recordMode notes in the session's record how its commands run (once per session object).
func (s *session) recordMode(mode string) {
	s.mu.Lock()
	done := s.moded
	s.moded = true
	s.mu.Unlock()
	if done {
		return
	}
	if rec, _, ok := s.b.records.Read(s.name); ok && rec.Mode != mode {
		rec.Mode = mode
		s.b.records.Save(s.name, rec)
	}
}

var (
	_ sandbox.Backend        = (*Backend)(nil)
	_ sandbox.SessionManager = (*Backend)(nil)
	_ sandbox.Checker        = (*Backend)(nil)
	_ sandbox.Warner         = (*Backend)(nil)
	_ sandbox.Baseliner      = (*Backend)(nil)
	_ sandbox.Collector      = (*Backend)(nil)
)
