package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/sync/singleflight"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// The pool shares SSH connections between all sessions of this process that reach the same
// account on the same host the same way. A host entry is reference counted: the backend
// that opened it and each of its sessions hold a reference, and the connection closes when
// the last one lets go, so closing one session never disturbs another.
var pool = struct {
	sync.Mutex
	m map[string]*host // guarded by the embedded Mutex
}{m: map[string]*host{}}

// host is one shared remote account: its live connection(s) and what was learned about it.
type host struct {
	key   string
	s     *settings
	dial  *dialer
	log   *slog.Logger
	refs  int           // guarded by pool's Mutex
	setup chan struct{} // a one-slot semaphore for probing and uploading

	mu      sync.Mutex
	lives   []*live            // guarded by mu
	dialing singleflight.Group // one dial at a time; the others wait for it
	closed  bool               // guarded by mu
	wg      sync.WaitGroup

	info *remoteInfo // guarded by the setup slot

	place       *placement // guarded by mu
	guessFailed bool       // guarded by mu

	sftpMu   sync.Mutex
	sftpCl   *sftp.Client // guarded by sftpMu
	sftpLive *live        // guarded by sftpMu
	sftpRel  func()       // guarded by sftpMu
}

// live is one SSH connection. Usually a host has one; when the server's MaxSessions is
// reached, another is opened next to it.
type live struct {
	client   *gossh.Client
	jumps    []*gossh.Client
	dead     chan struct{}
	channels int  // open channels, under host.mu
	limit    int  // the server refused a channel at this many; 0 = no limit seen
	retired  bool // an idle extra connection being closed; under host.mu
}

func (l *live) isDead() bool {
	select {
	case <-l.dead:
		return true
	default:
		return false
	}
}

// acquire returns the pool entry for s, creating it, with one more reference.
func acquire(s *settings, d *dialer, log *slog.Logger) *host {
	pool.Lock()
	defer pool.Unlock()
	key := s.poolKey()
	h := pool.m[key]
	if h == nil {
		h = &host{key: key, s: s, dial: d, log: log, setup: make(chan struct{}, 1)}
		pool.m[key] = h
	}
	h.refs++
	return h
}

// release drops a reference; the last one closes the connections and waits for their
// goroutines.
func (h *host) release() {
	pool.Lock()
	h.refs--
	last := h.refs == 0
	if last && pool.m[h.key] == h {
		delete(pool.m, h.key)
	}
	pool.Unlock()
	if !last {
		return
	}
	h.sftpMu.Lock()
	if h.sftpCl != nil {
		h.sftpCl.Close()
		h.sftpCl = nil
	}
	h.sftpMu.Unlock()
	h.mu.Lock()
	h.closed = true
	lives := append([]*live(nil), h.lives...)
	h.mu.Unlock()
	for _, l := range lives {
		l.client.Close()
	}
	h.wg.Wait()
}

// pick returns a live connection with room for one more channel, counting the channel;
// it dials when there is none.
func (h *host) pick(ctx context.Context) (*live, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, fmt.Errorf("connection pool: %w", sandbox.ErrClosed)
		}
		for _, l := range h.lives {
			if !l.isDead() && !l.retired && (l.limit == 0 || l.channels < l.limit) {
				l.channels++
				h.mu.Unlock()
				return l, nil
			}
		}
		h.mu.Unlock()
		select {
		case r := <-h.dialing.DoChan("dial", func() (any, error) { return nil, h.connect(ctx) }):
			if r.Err != nil {
				return nil, r.Err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// connect dials a new connection and adds it to the host's live ones.
func (h *host) connect(ctx context.Context) error {
	l, err := h.dial.dial(ctx, h.s)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		l.client.Close()
		return fmt.Errorf("connection pool: %w", sandbox.ErrClosed)
	}
	h.lives = append(h.lives, l)
	h.wg.Add(1)
	go h.watch(l)
	if h.s.keepalive > 0 {
		h.wg.Add(1)
		go h.keepalive(l)
	}
	h.log.Debug("ssh connection established", "endpoint", h.s.target.String(), "connections", len(h.lives))
	return nil
}

// watch waits for a connection to end and forgets it.
func (h *host) watch(l *live) {
	defer h.wg.Done()
	err := l.client.Wait()
	for i := len(l.jumps) - 1; i >= 0; i-- {
		l.jumps[i].Close()
	}
	h.mu.Lock()
	for i, x := range h.lives {
		if x == l {
			h.lives = append(h.lives[:i], h.lives[i+1:]...)
			break
		}
	}
	h.mu.Unlock()
	close(l.dead)
	h.log.Debug("ssh connection ended", "endpoint", h.s.target.String(), "err", err)
}

// keepalive sends keepalive@openssh.com every interval. When the server has answered none
// of them for three intervals, the connection is closed, so a dead peer is noticed and the
// next command reconnects. A late answer counts as an answer (as ServerAliveCountMax does):
// a busy server is not a dead one.
func (h *host) keepalive(l *live) {
	defer h.wg.Done()
	t := time.NewTicker(h.s.keepalive)
	defer t.Stop()
	var lastReply atomic.Int64
	lastReply.Store(time.Now().UnixNano())
	for {
		select {
		case <-l.dead:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, lastReply.Load())) > 3*h.s.keepalive {
			h.log.Warn("ssh server stopped answering keepalives; closing the connection", "endpoint", h.s.target.String())
			l.client.Close()
			return
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			// Returns when the server answers or the connection closes; requests queue
			// behind an unanswered one.
			if _, _, err := l.client.SendRequest("keepalive@openssh.com", true, nil); err == nil {
				lastReply.Store(time.Now().UnixNano())
			}
		}()
	}
}

// releaseChannel gives back a channel slot of l; an extra connection with nothing open is
// closed.
func (h *host) releaseChannel(l *live) {
	h.mu.Lock()
	l.channels--
	idle := l.channels == 0 && len(h.lives) > 1 && h.lives[0] != l && !l.retired
	if idle {
		l.retired = true // no pick may hand it out while it closes
	}
	if l.channels == 0 {
		l.limit = 0
	}
	h.mu.Unlock()
	if idle {
		l.client.Close()
	}
}

// newSession opens an SSH session channel on a live connection, reconnecting or opening an
// extra connection as needed. release must be called after the session is closed.
func (h *host) newSession(ctx context.Context) (*gossh.Session, func(), error) {
	var lastErr error
	for attempt := 0; attempt < 4; attempt++ {
		l, err := h.pick(ctx)
		if err != nil {
			return nil, nil, err
		}
		sess, err := l.client.NewSession()
		if err == nil {
			var once sync.Once
			return sess, func() { once.Do(func() { h.releaseChannel(l) }) }, nil
		}
		lastErr = err
		var oce *gossh.OpenChannelError
		h.mu.Lock()
		l.channels--
		if errors.As(err, &oce) {
			// MaxSessions (or similar) reached: remember the limit and use another connection.
			l.limit = max(l.channels, 1)
			h.mu.Unlock()
			continue
		}
		h.mu.Unlock()
		// The connection is broken; close it so the next pick dials afresh.
		l.client.Close()
		select {
		case <-l.dead:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	return nil, nil, fmt.Errorf("open an SSH session: %w", lastErr)
}

// client returns a live *gossh.Client (for callers that open their own channels, such as the
// baseline), dialing if needed. It does not count a channel.
func (h *host) client(ctx context.Context) (*gossh.Client, error) {
	l, err := h.pick(ctx)
	if err != nil {
		return nil, err
	}
	h.releaseChannel(l)
	return l.client, nil
}

// run runs cmd in a new session (through the remote user's shell, as OpenSSH does) with
// stdin, and returns its output and exit code. A cancelled ctx closes the session.
func (h *host) run(ctx context.Context, cmd string, stdin io.Reader) (stdout, stderr []byte, code int, err error) {
	sess, release, err := h.newSession(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	defer release()
	defer sess.Close()
	var o, e bytes.Buffer
	sess.Stdout, sess.Stderr = &o, &e
	if stdin != nil {
		sess.Stdin = stdin
	}
	done := make(chan error, 1)
	if err := sess.Start(cmd); err != nil {
		return nil, nil, 0, err
	}
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sess.Close()
		<-done
		return o.Bytes(), e.Bytes(), 0, ctx.Err()
	}
	var ee *gossh.ExitError
	switch {
	case err == nil:
		return o.Bytes(), e.Bytes(), 0, nil
	case errors.As(err, &ee):
		return o.Bytes(), e.Bytes(), ee.ExitStatus(), nil
	default:
		return o.Bytes(), e.Bytes(), 0, err
	}
}

// sftp returns the host's shared SFTP client, starting one if needed.
func (h *host) sftp(ctx context.Context) (*sftp.Client, error) {
	h.sftpMu.Lock()
	defer h.sftpMu.Unlock()
	if h.sftpCl != nil && !h.sftpLive.isDead() {
		return h.sftpCl, nil
	}
	if h.sftpCl != nil {
		h.sftpCl.Close()
		h.sftpRel()
		h.sftpCl = nil
	}
	l, err := h.pick(ctx)
	if err != nil {
		return nil, err
	}
	cl, err := sftp.NewClient(l.client, sftp.UseConcurrentWrites(true))
	var closeExec func()
	if err != nil {
		// Hardened hosts often drop the sftp Subsystem line but keep the sftp-server
		// program: speak SFTP to it over an exec channel instead.
		var xerr error
		if cl, closeExec, xerr = execSFTP(l.client); xerr != nil {
			h.releaseChannel(l)
			return nil, fmt.Errorf("%w: start SFTP: the server has no sftp subsystem (%v) and no sftp-server program to run instead (%v)", ErrNoSFTP, err, xerr)
		}
	}
	h.sftpCl, h.sftpLive = cl, l
	var once sync.Once
	h.sftpRel = func() {
		once.Do(func() {
			if closeExec != nil {
				closeExec()
			}
			h.releaseChannel(l)
		})
	}
	return cl, nil
}

// ErrNoSFTP says the host offers no SFTP at all; the helper is then uploaded over an exec
// channel, and features that browse the remote file system say they need SFTP.
var ErrNoSFTP = errors.New("no SFTP on the host")

// sftpServers are where OpenSSH's sftp-server lives on common systems.
var sftpServers = []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/ssh/sftp-server", "/usr/libexec/sftp-server", "/usr/lib/sftp-server"}

// execSFTP runs sftp-server in an exec channel and returns an SFTP client speaking to it.
func execSFTP(c *gossh.Client) (*sftp.Client, func(), error) {
	if len(sftpServers) == 0 {
		return nil, nil, errors.New("no sftp-server paths to try")
	}
	var script strings.Builder
	script.WriteString("for p in")
	for _, p := range sftpServers {
		script.WriteString(" " + shq(p))
	}
	script.WriteString(`; do [ -x "$p" ] && exec "$p"; done; exit 127`)
	sess, err := c.NewSession()
	if err != nil {
		return nil, nil, err
	}
	w, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, nil, err
	}
	r, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, nil, err
	}
	if err := sess.Start(script.String()); err != nil {
		sess.Close()
		return nil, nil, err
	}
	cl, err := sftp.NewClientPipe(r, w, sftp.UseConcurrentWrites(true))
	if err != nil {
		sess.Close()
		return nil, nil, fmt.Errorf("sftp-server over exec: %w", err)
	}
	return cl, func() { cl.Close(); sess.Close() }, nil
}

// dialer opens authenticated connections, through jump hosts when configured.
type dialer struct {
	hostKeys *hostKeys
	prompt   PromptFunc
	keys     *keyCache
}

// dial connects to s.target through s.jumps. ssh.connect_timeout bounds each hop's TCP
// connect and handshake together.
func (d *dialer) dial(ctx context.Context, s *settings) (*live, error) {
	hops := append(append([]endpoint(nil), s.jumps...), s.target)
	var prev *gossh.Client
	var jumps []*gossh.Client
	fail := func(err error) (*live, error) {
		for i := len(jumps) - 1; i >= 0; i-- {
			jumps[i].Close()
		}
		return nil, err
	}
	for i, ep := range hops {
		role := "host"
		if i < len(hops)-1 {
			role = "jump host"
		}
		cl, err := d.dialHop(ctx, s, ep, prev, role)
		if err != nil {
			return fail(err)
		}
		if i < len(hops)-1 {
			jumps = append(jumps, cl)
			prev = cl
			continue
		}
		return &live{client: cl, jumps: jumps, dead: make(chan struct{})}, nil
	}
	return fail(errors.New("no host to dial"))
}

func (d *dialer) dialHop(ctx context.Context, s *settings, ep endpoint, via *gossh.Client, role string) (*gossh.Client, error) {
	hctx, cancel := context.WithTimeout(ctx, s.connectTimeout)
	defer cancel()
	var nc net.Conn
	var err error
	if via == nil {
		var nd net.Dialer
		nc, err = nd.DialContext(hctx, "tcp", ep.addr())
	} else {
		nc, err = via.DialContext(hctx, "tcp", ep.addr())
	}
	if err != nil {
		return nil, &DialError{Role: role, Endpoint: ep, Timeout: s.connectTimeout, Err: contextual(ctx, hctx, err)}
	}
	// The handshake has no context of its own: closing the socket ends it. ssh.connect_timeout
	// bounds the server's part; decrypting a key or asking for its passphrase pauses it.
	ht := newHandshakeTimer(s.connectTimeout, func() { nc.Close() })
	verified := false
	as := &authState{ep: ep, s: s, prompt: d.prompt, keys: d.keys, local: ht.local}
	cfg := &gossh.ClientConfig{
		User:              ep.user,
		HostKeyCallback:   d.hostKeys.callback(ep.addr(), &verified),
		HostKeyAlgorithms: d.hostKeys.algorithms(ep.addr()),
		AuthCallback:      as.next,
	}
	stop := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-ctx.Done():
			nc.Close()
		case <-stop:
		}
	}()
	c, chans, reqs, err := gossh.NewClientConn(nc, ep.addr(), cfg)
	as.close()
	timedOut := ht.stop()
	close(stop)
	<-watchDone
	if err == nil && (timedOut || ctx.Err() != nil) {
		c.Close()
		err = errors.Join(ctx.Err(), errConnectTimeout)
	}
	if err != nil {
		var hke *HostKeyError
		switch {
		case errors.As(err, &hke):
			return nil, &DialError{Role: role, Endpoint: ep, Err: hke}
		case ctx.Err() != nil:
			return nil, &DialError{Role: role, Endpoint: ep, Timeout: s.connectTimeout, Err: fmt.Errorf("%w: %v", ctx.Err(), err), Handshake: true}
		case timedOut:
			return nil, &DialError{Role: role, Endpoint: ep, Timeout: s.connectTimeout, Err: fmt.Errorf("%w: %v", errConnectTimeout, err), Handshake: true}
		case verified:
			ae := &AuthError{Endpoint: ep.String(), Tried: as.tried, Problems: as.problems, Err: err}
			var kfe *KeyFileError
			if errors.As(err, &kfe) {
				ae.Problems = append(ae.Problems, kfe.Error())
			}
			return nil, &DialError{Role: role, Endpoint: ep, Err: ae}
		default:
			return nil, &DialError{Role: role, Endpoint: ep, Err: err, Handshake: true}
		}
	}
	return gossh.NewClient(c, chans, reqs), nil
}

// handshakeTimer runs expire when the handshake has taken longer than d, not counting the
// time spent in local work (see local).
type handshakeTimer struct {
	mu      sync.Mutex
	d       time.Duration
	t       *time.Timer // guarded by mu
	busy    int         // guarded by mu
	fired   bool        // guarded by mu
	stopped bool        // guarded by mu
}

func newHandshakeTimer(d time.Duration, expire func()) *handshakeTimer {
	h := &handshakeTimer{d: d}
	h.t = time.AfterFunc(d, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.busy > 0 || h.stopped {
			return
		}
		h.fired = true
		expire()
	})
	return h
}

// local runs f (decrypting a key, prompting for a passphrase) with the clock stopped; the
// server then gets a full timeout again.
func (h *handshakeTimer) local(f func()) {
	h.mu.Lock()
	h.busy++
	h.t.Stop()
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.busy--
		if h.busy == 0 && !h.fired && !h.stopped {
			h.t.Reset(h.d)
		}
	}()
	f()
}

// stop ends the timer and reports whether it fired.
func (h *handshakeTimer) stop() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.t.Stop()
	return h.fired
}

func contextual(parent, hop context.Context, err error) error {
	if parent.Err() != nil {
		return fmt.Errorf("%w: %v", parent.Err(), err)
	}
	if errors.Is(hop.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %v", errConnectTimeout, err)
	}
	return err
}

var errConnectTimeout = errors.New("no answer within ssh.connect_timeout")
