// Package ssh runs commands on a remote host over SSH. Each session keeps one SSH channel
// open to the static sandbox helper (internal/agent), which the backend uploads once per
// host and architecture; where the helper cannot run, a plain-shell protocol over one shell
// channel takes its place. Connections are shared by all sessions of a process that reach
// the same account, with reference counting, keepalives and transparent reconnection.
// Host keys are checked against known_hosts: first use records the key (accept-new), a
// changed key is always refused.
package ssh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Name is the backend's registry name.
const Name = "ssh"

// Options are settings a program can give besides the configuration.
type Options struct {
	// Prompt asks for a key passphrase or password; nil asks on the controlling terminal
	// (/dev/tty) and fails clearly when there is none.
	Prompt PromptFunc
	// ForceShell uses the plain-shell protocol even where the helper could run.
	ForceShell bool
	// SSHConfig is the OpenSSH client configuration to honour; "" means ~/.ssh/config and
	// "none" reads none.
	SSHConfig string
}

// Backend runs sessions on one remote host.
type Backend struct {
	cfg  config.SSHConfig
	fo   sandbox.FactoryOptions
	o    Options
	log  *slog.Logger
	keys keyCache

	once sync.Once
	s    *settings
	sErr error

	mu     sync.Mutex
	h      *host // guarded by mu; the backend's own reference, taken on first use
	closed bool  // guarded by mu
}

// New builds the ssh backend from its config section. It does no I/O: the host is reached
// in Open, Check and friends.
func New(cfg config.SSHConfig, fo sandbox.FactoryOptions) (sandbox.Backend, error) {
	return sandbox.AsBackend(NewWithOptions(cfg, fo, Options{}))
}

// NewWithOptions is New with program-level options.
func NewWithOptions(cfg config.SSHConfig, fo sandbox.FactoryOptions, o Options) (*Backend, error) {
	b := &Backend{cfg: cfg, fo: fo, o: o}
	b.log = fo.Log().With("backend", Name)
	return b, nil
}

// Name returns "ssh".
func (b *Backend) Name() string { return Name }

// Capabilities reports what ssh sessions do.
func (b *Backend) Capabilities() sandbox.Capabilities {
	target := "the remote host"
	if s, err := b.settings(); err == nil {
		target = s.target.String()
	}
	// The plain-shell protocol (forced, or where the helper cannot run) has no terminal.
	return sandbox.Capabilities{Jobs: true, Files: true, Stdin: true, Persistent: true, Terminal: !b.o.ForceShell,
		Isolation: "the machine boundary: commands run on " + target + " with that account's permissions, and nothing confines them on that host",
		Network:   true, Host: true}
}

// Warnings lists configuration choices that weaken the setup.
func (b *Backend) Warnings() []string {
	var w []string
	if b.cfg.PasswordAuth {
		w = append(w, "ssh.password_auth is on: password logins can be guessed or phished; prefer a key")
	}
	if s, err := b.settings(); err == nil && s.target.user == "root" {
		w = append(w, "ssh logs in as root: commands can change anything on "+s.target.host+"; prefer an unprivileged account")
	}
	return w
}

func (b *Backend) settings() (*settings, error) {
	b.once.Do(func() { b.s, b.sErr = resolveSettings(b.cfg, b.fo, b.o) })
	return b.s, b.sErr
}

func (b *Backend) progressf(format string, args ...any) {
	if b.fo.Progress != nil {
		fmt.Fprintf(b.fo.Progress, format, args...)
	}
}

// host returns the shared connection entry with a new reference for the caller, who must
// call release on it.
func (b *Backend) host() (*host, error) {
	s, err := b.settings()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, sandbox.ErrClosed
	}
	if b.h == nil {
		d := &dialer{hostKeys: &hostKeys{path: s.knownHosts, policy: s.policy, progress: b.fo.Progress},
			prompt: b.o.Prompt, keys: &b.keys}
		b.h = acquire(s, d, b.log)
	}
	return acquire(s, b.h.dial, b.log), nil
}

// Close releases the backend's hold on its connection; sessions still open keep theirs.
func (b *Backend) Close() error {
	b.mu.Lock()
	h := b.h
	b.h = nil
	b.closed = true
	b.mu.Unlock()
	if h != nil {
		h.release()
	}
	return nil
}

// Open returns the named session: it connects, starts the session's helper (installing it
// on first use of the host) and resumes any state an earlier process left.
func (b *Backend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return nil, wrap("open", name, err)
	}
	h, err := b.host()
	if err != nil {
		return nil, wrap("open", name, err)
	}
	client, p, err := b.start(ctx, h, name)
	if err != nil {
		h.release()
		return nil, wrap("open", name, err)
	}
	if p.shell {
		ss, err := newShellSession(ctx, b, h, name)
		if err != nil {
			h.release()
			return nil, wrap("open", name, err)
		}
		return ss, nil
	}
	first := client
	started := false
	start := func(ctx context.Context) (channel.Started, error) {
		if first != nil {
			c := first
			first, started = nil, true
			return channel.Started{Client: c}, nil
		}
		c, p, err := b.start(ctx, h, name)
		if err != nil {
			return channel.Started{}, wrap("start", name, err)
		}
		if p.shell {
			return channel.Started{}, wrap("start", name, errors.New("the helper can no longer run on this host; open the session again"))
		}
		recreated := started && c.Hello().Fresh
		started = true
		return channel.Started{Client: c, Recreated: recreated}, nil
	}
	var closeOnce sync.Once
	onClose := func() error {
		closeOnce.Do(func() {
			if first != nil {
				first.Close()
				first = nil
			}
			h.release()
		})
		return nil
	}
	return channel.New(channel.Options{Backend: Name, Name: name, Start: start,
		SpillDir: filepath.Join(b.fo.StateDir, "output"), Logger: b.fo.Logger, OnClose: onClose}), nil
}

// start starts the session's helper, working out first (once per host) where it lives. It
// returns the plain-shell placement, and no client, when the helper cannot run there.
//
// This is not agentbin.Start, whose retry follows the start script's exit status (97: not
// there yet): here the first attempt runs the helper where the host was set up earlier, or
// where a guess made without probing puts it (the home cache, this machine's architecture),
// and any failure to start there (missing, another architecture, a noexec home: 127, 126 or
// an exec error alike) means probing the host and installing, through agentbin.Install,
// where the helper can run, once.
func (b *Backend) start(ctx context.Context, h *host, name string) (*agent.Client, *placement, error) {
	for attempt := 0; ; attempt++ {
		p, err := b.placementFor(ctx, h)
		if err != nil || p.shell {
			return nil, p, err
		}
		c, err := b.startHelper(ctx, h, name, p)
		if err == nil {
			// terminal.env_passthrough values travel inside the protocol, never on the
			// remote command line and without depending on the server's AcceptEnv.
			if err := c.SeedEnv(ctx, b.passthrough()); err != nil {
				c.Close()
				return nil, p, fmt.Errorf("pass environment to the helper: %w", err)
			}
			return c, p, nil
		}
		var hse *helperStartError
		if attempt > 0 || !errors.As(err, &hse) || ctx.Err() != nil {
			return nil, p, err
		}
		// The guess was wrong, or the installed helper vanished: set up again, once.
		b.log.Debug("helper did not start; installing it", "err", err)
		h.forget(p)
	}
}

// placementFor returns where sessions on h run, deciding it once per host: the helper
// where an earlier run installed it (a guess, checked by starting it), else after probing
// the host and installing the helper.
func (b *Backend) placementFor(ctx context.Context, h *host) (*placement, error) {
	if b.o.ForceShell {
		return forcedShell, nil
	}
	h.mu.Lock()
	p := h.place
	h.mu.Unlock()
	if p != nil {
		return p, nil
	}
	unlock, err := h.lockSetup(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	h.mu.Lock()
	p, guessFailed := h.place, h.guessFailed
	h.mu.Unlock()
	if p != nil {
		return p, nil
	}
	if !guessFailed {
		p = guessPlacement(b.fo.StateDir)
	}
	if p == nil {
		if p, err = b.setupPlacement(ctx, h); err != nil {
			return nil, err
		}
	}
	h.mu.Lock()
	h.place = p
	h.mu.Unlock()
	return p, nil
}

// forcedShell is the placement of a backend built with Options.ForceShell.
var forcedShell = &placement{shell: true, reason: "forced by options"}

// forget drops a placement that did not work, unless another session replaced it already.
func (h *host) forget(p *placement) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.guessed {
		h.guessFailed = true
	}
	if h.place == p {
		h.place = nil
	}
}

// Check connects and runs `true`, so `doctor` and `setup` can tell whether the host is
// usable; the error says what is wrong and what to do.
func (b *Backend) Check(ctx context.Context) error {
	h, err := b.host()
	if err != nil {
		return wrap("check", "", err)
	}
	defer h.release()
	_, errOut, code, err := h.run(ctx, "true", nil)
	if err != nil {
		return wrap("check", h.s.target.String(), err)
	}
	if code != 0 {
		return wrap("check", h.s.target.String(), fmt.Errorf("`true` exited %d over SSH: %s: %w", code, oneLine(errOut, 300), sandbox.ErrUnavailable))
	}
	return nil
}

// Baseline times the raw way of running `true` over SSH without hermes-sandbox: a new
// session on the already-open connection, Run("true"), close.
func (b *Backend) Baseline(ctx context.Context, session string, n int) (string, []time.Duration, error) {
	h, err := b.host()
	if err != nil {
		return "", nil, wrap("baseline", session, err)
	}
	defer h.release()
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		t := time.Now()
		sess, release, err := h.newSession(ctx)
		if err != nil {
			return "", nil, wrap("baseline", session, err)
		}
		err = sess.Run("true")
		sess.Close()
		release()
		if err != nil {
			return "", nil, wrap("baseline", session, err)
		}
		out = append(out, time.Since(t))
	}
	return "new SSH session + Run(\"true\") on the open connection", out, nil
}

var (
	_ sandbox.Backend        = (*Backend)(nil)
	_ sandbox.SessionManager = (*Backend)(nil)
	_ sandbox.Checker        = (*Backend)(nil)
	_ sandbox.Baseliner      = (*Backend)(nil)
	_ sandbox.Warner         = (*Backend)(nil)
)

// passthrough returns the caller's values of the names in terminal.env_passthrough.
func (b *Backend) passthrough() map[string]string { return b.fo.PassthroughMap() }
