package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// sessionPool is a session owner's warm backends and sessions. A backend is kept per
// backend choice and settings (a changed config gets a new one), each session until it has
// been idle for terminal.keep_alive.
type sessionPool struct {
	logger *slog.Logger

	create sync.Mutex // one backend is built at a time

	mu      sync.Mutex
	keep    time.Duration         // guarded by mu; the latest terminal.keep_alive
	entries map[string]*poolEntry // guarded by mu; by backend choice and settings

	// pending is the work left after calls have answered (removing ephemeral sandboxes);
	// close waits for it before it closes the backends.
	pending sync.WaitGroup
}

// later runs f after the call that asked has answered its client; close waits for it.
func (p *sessionPool) later(f func()) {
	p.pending.Add(1)
	go func() {
		defer p.pending.Done()
		f()
	}()
}

func newSessionPool(keep time.Duration, logger *slog.Logger) *sessionPool {
	return &sessionPool{logger: logger, keep: keep, entries: map[string]*poolEntry{}}
}

func (p *sessionPool) keepAlive() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keep
}

func (p *sessionPool) setKeepAlive(d time.Duration) {
	p.mu.Lock()
	p.keep = d
	p.mu.Unlock()
}

// poolEntry is one warm backend and its sessions; it lends them to the gate
// (gate.SessionSource).
type poolEntry struct {
	backend  sandbox.Backend
	keep     time.Duration
	note     string // what choosing the backend said (auto), repeated to every call
	progress *swapWriter
	closers  []io.Closer // the egress audit sink

	opening sync.Mutex // one session opens at a time, outside mu

	mu       sync.Mutex
	users    int                       // guarded by mu
	used     time.Time                 // guarded by mu
	closed   bool                      // guarded by mu; reaped: a call that finds it takes a new entry
	sessions map[string]*pooledSession // guarded by mu
	// lent: every session out on loan, by identity, including forgotten ones
	lent map[sandbox.Session]*pooledSession // guarded by mu
}

// pooledSession's counters are guarded by its poolEntry's mu.
type pooledSession struct {
	sess  sandbox.Session
	users int       // guarded by poolEntry.mu
	used  time.Time // guarded by poolEntry.mu
	// stale: the session was removed by another process; it closes when its last user is done
	stale bool // guarded by poolEntry.mu
}

// entry finds or builds the backend for cfg and counts the caller as its user until done.
func (p *sessionPool) entry(ctx context.Context, a *app, cfg *config.Config) (*poolEntry, error) {
	// The gate's own settings apply per call; only what the backend and its egress records
	// are built from decides whether a warm one can be used.
	k := *cfg
	k.Approvals, k.Tools, k.Loop, k.MCP = config.ApprovalsConfig{}, config.ToolsConfig{}, config.LoopConfig{}, config.MCPConfig{}
	key := a.selectedName(cfg) + "\x00" + k.Fingerprint()
	if e := p.take(key, a); e != nil {
		return e, nil
	}
	p.create.Lock()
	defer p.create.Unlock()
	if e := p.take(key, a); e != nil {
		return e, nil
	}
	progress := &swapWriter{w: a.stderr}
	var note strings.Builder
	name, err := (&app{stderr: io.MultiWriter(a.stderr, &note), environ: a.environ, registry: a.registry, sandboxFlag: a.sandboxFlag}).backendName(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if !a.registry.Has(name) {
		_, err := a.openBackend(ctx, cfg) // its error names what is built in
		return nil, err
	}
	opts := cfg.BackendOptions(sandbox.FactoryOptions{Progress: progress, Environ: a.environ, StateDir: cfg.StateDir(), Logger: p.logger})
	b, err := a.registry.New(name, cfg, opts)
	if err != nil {
		return nil, err
	}
	e := &poolEntry{backend: b, keep: cfg.Terminal.KeepAlive, note: note.String(), progress: progress,
		sessions: map[string]*pooledSession{}, lent: map[sandbox.Session]*pooledSession{}, users: 1, used: time.Now()}
	if o, ok := b.(sandbox.EgressObserver); ok && cfg.Audit.Enabled && cfg.Audit.Level != config.AuditOff {
		// Egress happens between calls too, so its records go to a sink of the entry's own.
		logger := slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
		sa := &app{environ: a.environ}
		sink := sa.openAudit(cfg, a.expandHome(cfg.Audit.LogDestination), logger)
		e.closers = sa.closers
		o.ObserveEgress(egressAuditor(sink, logger))
	}
	p.mu.Lock()
	p.entries[key] = e
	p.mu.Unlock()
	return e, nil
}

// take returns the entry for key, counting a as its user, or nil.
func (p *sessionPool) take(key string, a *app) *poolEntry {
	p.mu.Lock()
	e := p.entries[key]
	p.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.users++
	e.used = time.Now()
	e.mu.Unlock()
	e.progress.set(a.stderr)
	if e.note != "" {
		fmt.Fprint(a.stderr, e.note)
	}
	return e
}

// done ends a caller's use of e.
func (e *poolEntry) done(stderr io.Writer) {
	e.mu.Lock()
	e.users = max(0, e.users-1)
	e.used = time.Now()
	e.mu.Unlock()
	e.progress.unset(stderr)
}

// Open lends the warm session name, opening it on first use. Opening (an SSH dial, a helper
// upload) happens outside e.mu, so other calls on the backend never wait for it.
func (e *poolEntry) Open(ctx context.Context, name string) (sandbox.Session, error) {
	if s := e.lend(name); s != nil {
		return s, nil
	}
	e.opening.Lock()
	defer e.opening.Unlock()
	if s := e.lend(name); s != nil {
		return s, nil
	}
	s, err := e.backend.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ps := &pooledSession{sess: s, users: 1, used: time.Now()}
	e.sessions[name] = ps
	e.lent[s] = ps
	return s, nil
}

// lend lends the open session name, or returns nil.
func (e *poolEntry) lend(name string) sandbox.Session {
	e.mu.Lock()
	defer e.mu.Unlock()
	ps := e.sessions[name]
	if ps == nil {
		return nil
	}
	ps.users++
	ps.used = time.Now()
	return ps.sess
}

// Release takes a lent session back; it stays open for the next call.
func (e *poolEntry) Release(s sandbox.Session) {
	e.mu.Lock()
	ps := e.lent[s]
	if ps == nil {
		e.mu.Unlock()
		return
	}
	ps.users = max(0, ps.users-1)
	ps.used = time.Now()
	closing := ps.stale && ps.users == 0
	if closing {
		delete(e.lent, s)
	}
	e.mu.Unlock()
	if closing {
		s.Close()
	}
}

// forget drops the warm sessions of backend named session ("" = all of them), which another
// process removed: the next call opens the session anew. One in use closes when its call ends.
func (p *sessionPool) forget(backend, session string) {
	p.mu.Lock()
	entries := make([]*poolEntry, 0, len(p.entries))
	for _, e := range p.entries {
		if e.backend.Name() == backend {
			entries = append(entries, e)
		}
	}
	p.mu.Unlock()
	for _, e := range entries {
		var closing []sandbox.Session
		e.mu.Lock()
		for name, ps := range e.sessions {
			if session != "" && name != session {
				continue
			}
			ps.stale = true
			delete(e.sessions, name)
			if ps.users == 0 {
				delete(e.lent, ps.sess)
				closing = append(closing, ps.sess)
			}
		}
		e.mu.Unlock()
		for _, s := range closing {
			s.Close()
		}
	}
}

// reap closes sessions and backends idle for their keep_alive, until ctx ends.
func (p *sessionPool) reap(ctx context.Context) {
	for {
		tick := min(max(p.keepAlive()/4, 50*time.Millisecond), 2*time.Second)
		select {
		case <-ctx.Done():
			return
		case <-time.After(tick):
		}
		p.sweep(false)
	}
}

// sweep closes what has been idle long enough, or everything when all is set.
func (p *sessionPool) sweep(all bool) {
	p.mu.Lock()
	entries := make(map[string]*poolEntry, len(p.entries))
	for k, e := range p.entries {
		entries[k] = e
	}
	p.mu.Unlock()
	for key, e := range entries {
		var closing []sandbox.Session
		e.mu.Lock()
		for name, ps := range e.sessions {
			if all || (ps.users == 0 && time.Since(ps.used) >= e.keep) {
				closing = append(closing, ps.sess)
				delete(e.sessions, name)
				delete(e.lent, ps.sess)
			}
		}
		if all {
			for s := range e.lent {
				closing = append(closing, s)
			}
			clear(e.lent)
		}
		gone := all || (e.users == 0 && len(e.sessions) == 0 && time.Since(e.used) >= e.keep)
		if gone {
			// Marked and unlisted under e.mu, so that no call takes it from here on.
			e.closed = true
			p.mu.Lock()
			if p.entries[key] == e {
				delete(p.entries, key)
			}
			p.mu.Unlock()
		}
		e.mu.Unlock()
		for _, s := range closing {
			if err := s.Close(); err != nil {
				p.logger.Warn("owner: close an idle session", "session", s.Name(), "err", err)
			}
		}
		if !gone {
			continue
		}
		if err := e.backend.Close(); err != nil {
			p.logger.Warn("owner: close an idle backend", "backend", e.backend.Name(), "err", err)
		}
		for i := len(e.closers) - 1; i >= 0; i-- {
			e.closers[i].Close()
		}
	}
}

func (p *sessionPool) close() {
	p.pending.Wait()
	p.sweep(true)
}

// openPooledSession is openSession in a session owner: the backend and the session come warm
// from the pool, and the gate, approvals and audit are this call's own, as in any run. An
// ephemeral run gets a sandbox of its own from the warm backend (its pool of ready sandboxes,
// docker.pool_size), not kept warm for anyone else: the caller removes it when the command ends.
func (a *app) openPooledSession(ctx context.Context, cfg *config.Config, name string, ephemeral bool) (context.Context, sandbox.Backend, sandbox.Session, func(), error) {
	e, err := a.pool.entry(ctx, a, cfg)
	if err != nil {
		return ctx, nil, nil, nil, err
	}
	release := func() { e.done(a.stderr) }
	opts, err := a.gateOptions(cfg, e.backend)
	if err != nil {
		release()
		return ctx, nil, nil, nil, err
	}
	switch eo, ok := e.backend.(sandbox.EphemeralOpener); {
	case !ephemeral:
		opts.Sessions = e
	case ok:
		// A sandbox of its own (a warm pool's member), which the backend disposes of when
		// the session closes: reset and kept for the next run, or removed.
		opts.Sessions = ephemeralSource{eo}
		a.disposes = true
		// Its approvals and call count live as long as it does: nothing to keep in files
		// (which its removal would otherwise have to delete).
		opts.Store = nil
	}
	// Otherwise an ephemeral session is opened for this call, closed by it and removed.
	b := gate.Wrap(e.backend, opts)
	ctx, sess, done, err := a.openApproved(ctx, b, name, release)
	if err != nil {
		return ctx, nil, nil, nil, err
	}
	return ctx, b, sess, done, nil
}

// ephemeralSource opens ephemeral sessions for the gate (gate.SessionSource); closing one
// disposes of its sandbox.
type ephemeralSource struct{ eo sandbox.EphemeralOpener }

func (s ephemeralSource) Open(ctx context.Context, name string) (sandbox.Session, error) {
	return s.eo.OpenEphemeral(ctx, name)
}

func (s ephemeralSource) Release(sess sandbox.Session) { sess.Close() }

// swapWriter writes to the stderr of the call that uses a warm backend now (its progress
// messages), or nowhere between calls.
type swapWriter struct {
	mu sync.Mutex
	w  io.Writer // guarded by mu
}

func (s *swapWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return len(p), nil
	}
	_, _ = s.w.Write(p)
	return len(p), nil
}

func (s *swapWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *swapWriter) unset(w io.Writer) {
	s.mu.Lock()
	if s.w == w {
		s.w = nil
	}
	s.mu.Unlock()
}
