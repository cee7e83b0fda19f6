// Package daemon is the session owner's side of package owner: the server that serves calls
// on the private socket, and Start, which starts an owner for an exec that found none.
package daemon

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/hermes-sandbox/hermes-sandbox/internal/owner"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Request is one call an owner serves.
type Request struct {
	Hello owner.Hello
	// Stdin is the client's standard input; the client starts sending it on the first Read.
	Stdin io.Reader
	// Stdout and Stderr reach the client's.
	Stdout, Stderr io.Writer

	c       *serverConn
	started sync.Once
}

// Started tells the client the call has begun: from now on it cannot be declined, and a lost
// owner is an error at the client rather than a reason to run the call itself.
func (r *Request) Started() { r.started.Do(func() { _ = r.c.send(owner.FrameStarted, nil) }) }

// Prompt shows text on the client's terminal and returns the line typed there.
func (r *Request) Prompt(ctx context.Context, text string) (string, error) {
	if err := r.c.send(owner.FrameTTYPrompt, []byte(text)); err != nil {
		return "", err
	}
	select {
	case a, ok := <-r.c.answers:
		if !ok {
			return "", io.EOF
		}
		return a, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Handler serves one request under ctx, which ends when the client goes or is interrupted.
// It returns the exit code, or a reason to decline the call (which the client then runs
// itself); a handler declines only before it calls Started.
type Handler func(ctx context.Context, r *Request) (code int, decline string)

// Server serves a Handler on a private unix socket until it has been idle for KeepAlive.
type Server struct {
	Path    string
	Key     owner.Key
	Handler Handler
	// KeepAlive is how long the owner waits for a next call; read after each call, since the
	// configuration can change.
	KeepAlive func() time.Duration
	// Forget, if set, is told that a session was removed by another process (owner.Forget).
	Forget func(backend, session string)
	Logger *slog.Logger

	ln  *net.UnixListener
	ino uint64

	mu     sync.Mutex
	active int
	last   time.Time
	wg     sync.WaitGroup
}

// Listen creates the socket: mode 0600, in a directory of mode 0700 that this user owns. It
// replaces a stale socket at Path; callers hold the spawn lock, so no live owner is there.
func (s *Server) Listen() error {
	dir := filepath.Dir(s.Path)
	if err := owner.PrivateDir(dir); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", s.Path, os.Getpid())
	_ = os.Remove(tmp)
	addr, done, err := owner.Sockaddr(tmp)
	if err != nil {
		return err
	}
	defer done()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return fmt.Errorf("owner: listen on %s: %w", tmp, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, s.Path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(s.Path, &st); err != nil {
		ln.Close()
		return err
	}
	s.ln, s.ino = ln, st.Ino
	return nil
}

// Serve accepts calls until the owner has been idle for KeepAlive, its socket is removed or
// replaced, or ctx ends. It waits for the calls in progress before it returns.
func (s *Server) Serve(ctx context.Context) error {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	s.last = time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		s.ln.Close()
	}()
	go s.watch(ctx, cancel)
	var err error
	for {
		var conn *net.UnixConn
		conn, err = s.ln.AcceptUnix()
		if err != nil {
			break
		}
		if !samePeer(conn) {
			s.Logger.Warn("owner: refused a connection from another user")
			conn.Close()
			continue
		}
		s.mu.Lock()
		s.active++
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(ctx, conn)
			s.mu.Lock()
			s.active--
			s.last = time.Now()
			s.mu.Unlock()
		}()
	}
	s.removeSocket()
	s.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// removeSocket removes the socket if it is still this owner's.
func (s *Server) removeSocket() {
	var st syscall.Stat_t
	if syscall.Stat(s.Path, &st) == nil && st.Ino == s.ino {
		os.Remove(s.Path)
	}
}

// watch ends the owner when it has been idle long enough or its socket is gone.
func (s *Server) watch(ctx context.Context, stop func()) {
	for {
		keep := s.KeepAlive()
		tick := min(max(keep/4, 50*time.Millisecond), 2*time.Second)
		select {
		case <-ctx.Done():
			return
		case <-time.After(tick):
		}
		var st syscall.Stat_t
		if err := syscall.Stat(s.Path, &st); err != nil || st.Ino != s.ino {
			s.Logger.Info("owner: socket removed or replaced; exiting", "path", s.Path)
			stop()
			return
		}
		s.mu.Lock()
		idle := s.active == 0 && time.Since(s.last) >= s.KeepAlive()
		s.mu.Unlock()
		if idle {
			s.Logger.Info("owner: idle; exiting", "keep_alive", s.KeepAlive())
			stop()
			return
		}
	}
}

// samePeer reports whether the connecting process runs as this user.
func samePeer(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return false
	}
	return int(cred.Uid) == os.Getuid()
}

type serverConn struct {
	conn    *net.UnixConn
	mu      sync.Mutex
	answers chan string
	stdin   *stdinQueue
}

func (c *serverConn) send(typ byte, p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return owner.WriteFrame(c.conn, typ, p)
}

func (s *Server) serve(ctx context.Context, conn *net.UnixConn) {
	defer conn.Close()
	c := &serverConn{conn: conn, answers: make(chan string, 1), stdin: newStdinQueue()}
	typ, p, err := owner.ReadFrame(conn)
	if err == nil && typ == owner.FrameForget {
		if backend, session, err := owner.DecodeForget(p); err == nil && s.Forget != nil {
			s.Forget(backend, session)
		}
		_ = c.send(owner.FrameExit, binary.BigEndian.AppendUint32(nil, 0))
		return
	}
	if err != nil || typ != owner.FrameHello {
		return
	}
	h, err := owner.DecodeHello(p)
	if err != nil {
		_ = c.send(owner.FrameFallback, []byte(err.Error()))
		return
	}
	// The key names the environment the call runs with: the call's own environment must be
	// that one (an owner never runs a call under variables its key does not carry).
	if !h.Key.Equal(s.Key) || !owner.EnvMatches(h.Environ, h.Key) {
		_ = c.send(owner.FrameFallback, []byte("this owner serves another environment"))
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	want := sync.OnceFunc(func() { _ = c.send(owner.FrameWantStdin, nil) })
	req := &Request{Hello: h, c: c, Stdin: &lazyStdin{q: c.stdin, want: want},
		Stdout: frameWriter{c, owner.FrameStdout}, Stderr: frameWriter{c, owner.FrameStderr}}
	go func() {
		// The client's frames: a lost connection or a signal cancels the call.
		defer cancel()
		defer close(c.answers)
		defer c.stdin.close()
		for {
			typ, p, err := owner.ReadFrame(conn)
			if err != nil {
				return
			}
			switch typ {
			case owner.FrameStdin:
				c.stdin.put(p)
			case owner.FrameStdinEOF:
				c.stdin.close()
			case owner.FrameSignal:
				return
			case owner.FrameTTYAnswer:
				select {
				case c.answers <- string(p):
				default:
				}
			}
		}
	}()
	code, decline := s.Handler(ctx, req)
	if decline != "" {
		_ = c.send(owner.FrameFallback, []byte(decline))
		return
	}
	_ = c.send(owner.FrameExit, binary.BigEndian.AppendUint32(nil, uint32(int32(code))))
}

type frameWriter struct {
	c   *serverConn
	typ byte
}

func (w frameWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += 1 << 20 {
		end := min(off+1<<20, len(p))
		if err := w.c.send(w.typ, p[off:end]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// lazyStdin asks the client for its input on the first Read.
type lazyStdin struct {
	q    *stdinQueue
	want func()
}

func (l *lazyStdin) Read(p []byte) (int, error) {
	if !l.q.ended() {
		l.want()
	}
	return l.q.read(p)
}

// stdinQueue holds input that arrived before the command read it, up to a bound, so that the
// connection's reader never waits on the command (it must still see a cancel).
type stdinQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	closed bool
}

const stdinQueueMax = 4 << 20

func newStdinQueue() *stdinQueue {
	q := &stdinQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *stdinQueue) put(p []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) >= stdinQueueMax && !q.closed {
		q.cond.Wait()
	}
	if !q.closed {
		q.buf = append(q.buf, p...)
	}
	q.cond.Broadcast()
}

func (q *stdinQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// ended reports whether the input has all arrived and been read (the client said EOF).
func (q *stdinQueue) ended() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed && len(q.buf) == 0
}

func (q *stdinQueue) read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, q.buf)
	q.buf = q.buf[n:]
	q.cond.Broadcast()
	return n, nil
}
