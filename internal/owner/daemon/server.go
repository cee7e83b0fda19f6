// Package daemon is the session owner's side of package owner: the server that serves calls
// on the private socket, and Start, which starts an owner for an exec that found none.
package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/hermes-sandbox/hermes-sandbox/internal/owner"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
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
	id := r.c.promptSeq.Add(1)
	if err := r.c.send(owner.FrameTTYPrompt, append(binary.BigEndian.AppendUint32(nil, id), text...)); err != nil {
		return "", err
	}
	for {
		select {
		case a, ok := <-r.c.answers:
			if !ok {
				return "", io.EOF
			}
			if a.id == id { // an answer to an earlier prompt, typed after it timed out, is dropped
				return a.line, nil
			}
		case <-ctx.Done():
			return "", ctx.Err()
		}
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
	active int       // guarded by mu
	last   time.Time // guarded by mu
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
	ino, err := inode(s.Path)
	if err != nil {
		ln.Close()
		return err
	}
	s.ln, s.ino = ln, ino
	return nil
}

// Serve accepts calls until the owner has been idle for KeepAlive, its socket is removed or
// replaced, or ctx ends. It waits for the calls in progress before it returns.
func (s *Server) Serve(ctx context.Context) error {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.KeepAlive == nil {
		s.KeepAlive = func() time.Duration { return 10 * time.Minute }
	}
	s.last = time.Now()
	// Calls run under ctx; an owner that stops accepting (idle, its socket gone) lets the
	// calls in progress finish.
	accepting, stopAccepting := context.WithCancel(ctx)
	defer stopAccepting()
	go func() {
		<-accepting.Done()
		s.ln.Close()
	}()
	go s.watch(accepting, stopAccepting)
	var err error
	for {
		var conn *net.UnixConn
		conn, err = s.ln.AcceptUnix()
		if err != nil {
			if accepting.Err() == nil && !errors.Is(err, net.ErrClosed) {
				// Out of descriptors, say: wait a little rather than end the owner.
				s.Logger.Warn("owner: accept", "err", err)
				if sandbox.Sleep(accepting, 50*time.Millisecond) == nil {
					continue
				}
			}
			break
		}
		pid, ok := samePeer(conn)
		if !ok {
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
			called := s.serve(ctx, accepting, conn, pid)
			s.mu.Lock()
			s.active--
			if called { // probes and forgets do not keep an owner alive
				s.last = time.Now()
			}
			s.mu.Unlock()
		}()
	}
	s.removeSocket()
	s.wg.Wait()
	if accepting.Err() != nil {
		return nil
	}
	return err
}

// removeSocket removes the socket if it is still this owner's.
func (s *Server) removeSocket() {
	if ino, err := inode(s.Path); err == nil && ino == s.ino {
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
		if ino, err := inode(s.Path); err != nil || ino != s.ino {
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

type serverConn struct {
	conn      *net.UnixConn
	mu        sync.Mutex // serialises frames on conn
	answers   chan answer
	promptSeq atomic.Uint32
	stdin     *stdinQueue
}

func (c *serverConn) send(typ byte, p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return owner.WriteFrame(c.conn, typ, p)
}

// serve serves one connection; called reports whether it was a call the handler ran.
// accepting ends when the owner stops taking calls.
func (s *Server) serve(ctx, accepting context.Context, conn *net.UnixConn, pid int) (called bool) {
	defer conn.Close()
	c := &serverConn{conn: conn, answers: make(chan answer, 4), stdin: newStdinQueue()}
	_ = conn.SetReadDeadline(time.Now().Add(helloTimeout))
	typ, p, err := owner.ReadFrame(conn)
	_ = conn.SetReadDeadline(time.Time{})
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
	// Every part of the key, and the call's environment, is checked against the calling
	// process itself in VerifyPeer below.
	if !h.Key.Equal(s.Key) {
		_ = c.send(owner.FrameFallback, []byte("this owner serves another environment"))
		return
	}
	if err := owner.VerifyPeer(pid, h); err != nil {
		s.Logger.Warn("owner: declined a call from a process that is not what it says", "pid", pid, "why", err)
		_ = c.send(owner.FrameFallback, []byte("the calling process is not what its call says: "+err.Error()))
		return
	}
	if accepting.Err() != nil {
		// The owner is stopping (idle, or its socket went): the client runs the call itself.
		_ = c.send(owner.FrameFallback, []byte("the owner is exiting"))
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.stdin.grant = func(n int) { _ = c.send(owner.FrameWantStdin, binary.BigEndian.AppendUint32(nil, uint32(n))) }
	defer c.stdin.close() // a command that stopped reading must not hold its input
	req := &Request{Hello: h, c: c, Stdin: c.stdin,
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
				if len(p) < 4 {
					return
				}
				select {
				case c.answers <- answer{binary.BigEndian.Uint32(p), string(p[4:])}:
				default: // nobody asked: dropped
				}
			}
		}
	}()
	called = true
	code, decline := s.handle(ctx, req)
	if decline != "" {
		_ = c.send(owner.FrameFallback, []byte(decline))
		return
	}
	_ = c.send(owner.FrameExit, binary.BigEndian.AppendUint32(nil, uint32(int32(code))))
	return called
}

// handle runs the handler; a panic fails this call only (exit 1), not the owner and every
// other call it serves.
func (s *Server) handle(ctx context.Context, r *Request) (code int, decline string) {
	defer func() {
		if p := recover(); p != nil {
			s.Logger.Error("owner: a call panicked", "panic", p, "stack", string(debug.Stack()))
			fmt.Fprintf(r.Stderr, "hermes-sandbox: internal error in the session owner: %v\n", p)
			code, decline = 1, ""
		}
	}()
	return s.Handler(ctx, r)
}

// helloTimeout bounds how long a connection may take to say what it wants.
const helloTimeout = 10 * time.Second

type answer struct {
	id   uint32
	line string
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

// stdinQueue holds the client's input until the command reads it. The client sends only
// what the queue has granted (stdinWindow at most outstanding), so the connection's reader
// never waits on the command: it must still see a cancel or a lost client.
type stdinQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte // guarded by mu
	closed  bool   // guarded by mu
	granted int    // guarded by mu; granted and not yet arrived
	asked   bool   // guarded by mu
	grant   func(n int)
}

const stdinWindow = 1 << 20

func newStdinQueue() *stdinQueue {
	q := &stdinQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// put adds input that arrived; more than was granted breaks the protocol and ends the input.
func (q *stdinQueue) put(p []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if len(p) > q.granted {
		q.closed = true
	} else {
		q.granted -= len(p)
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

// Read reads the client's input; the first Read asks the client for it.
func (q *stdinQueue) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.topUp()
	for len(q.buf) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, q.buf)
	q.buf = q.buf[n:]
	q.topUp()
	return n, nil
}

// topUp grants the client more room once half the window is free (the first read asks for
// the whole window). The client said EOF already: nothing to ask for.
func (q *stdinQueue) topUp() {
	if q.closed || q.grant == nil {
		return
	}
	free := stdinWindow - q.granted - len(q.buf)
	if q.asked && free < stdinWindow/2 {
		return
	}
	q.asked = true
	q.granted += free
	q.grant(free)
}
