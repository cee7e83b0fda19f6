// Package mux carries many byte streams over one (a docker exec's stdin and stdout), with
// per-stream flow control so a slow reader stalls only its own stream. One side opens
// streams (the relay inside a sandbox, for each connection it accepts), the other accepts
// them (the proxy's side). The peer is not trusted: sizes are bounded and a stream that
// overruns its window is reset. It imports no networking beyond net.Addr, so the static
// in-sandbox helper stays small.
package mux

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Frame types.
const (
	fHello  = 'H' // payload: the opener's greeting (the relay's listening address)
	fOpen   = 'O' // a new stream
	fData   = 'D'
	fEOF    = 'E' // the sender will send no more data on the stream
	fReset  = 'R' // the stream is gone; payload: a reason
	fWindow = 'W' // payload: 4 bytes of credit for the receiver's peer
)

const (
	headerLen  = 9
	maxPayload = 64 << 10
	// Window is how many bytes a stream may have in flight unread.
	Window = 4 << 20
	// MaxStreams bounds the streams open at once on the accepting side.
	MaxStreams = 1024
)

// ErrClosed is returned on a session or stream that is closed.
var ErrClosed = errors.New("mux: closed")

// ErrReset is returned by a stream the peer reset.
var ErrReset = errors.New("mux: stream reset by peer")

// Session is one end of a multiplexed connection.
type Session struct {
	r      io.Reader
	w      io.Writer
	closer io.Closer

	wmu  sync.Mutex // serialises frames on w
	wbuf []byte     // guarded by wmu

	mu      sync.Mutex
	streams map[uint32]*Stream // guarded by mu
	nextID  uint32             // guarded by mu
	accept  chan *Stream
	hello   chan []byte
	err     error // guarded by mu; set once the session ends
	done    chan struct{}
}

// New returns a session reading frames from r and writing them to w; closer (may be nil)
// is closed by Close. It starts no goroutine: its owner runs Run.
func New(r io.Reader, w io.Writer, closer io.Closer) *Session {
	return &Session{r: bufio.NewReaderSize(r, 2*(headerLen+maxPayload)), w: w, closer: closer, streams: map[uint32]*Stream{}, nextID: 1,
		accept: make(chan *Stream, 64), hello: make(chan []byte, 1), done: make(chan struct{}),
		wbuf: make([]byte, headerLen+maxPayload)}
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Session) writeFrame(typ byte, id uint32, payload []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	select {
	case <-s.done:
		return ErrClosed
	default:
	}
	b := s.wbuf[:headerLen+len(payload)]
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:5], id)
	binary.BigEndian.PutUint32(b[5:9], uint32(len(payload)))
	copy(b[headerLen:], payload)
	_, err := s.w.Write(b)
	if err != nil {
		s.fail(fmt.Errorf("mux: write: %w", err))
	}
	return err
}

// Hello sends a greeting (once, by the opening side).
func (s *Session) Hello(b []byte) error {
	if len(b) > maxPayload {
		return errors.New("mux: hello too long")
	}
	return s.writeFrame(fHello, 0, b)
}

// Greeting delivers the peer's hello.
func (s *Session) Greeting() <-chan []byte { return s.hello }

// Open starts a new stream to the peer.
func (s *Session) Open() (*Stream, error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	id := s.nextID
	s.nextID++
	st := newStream(s, id)
	s.streams[id] = st
	s.mu.Unlock()
	if err := s.writeFrame(fOpen, id, nil); err != nil {
		s.forget(id)
		return nil, err
	}
	return st, nil
}

// Accept waits for the next stream the peer opens.
func (s *Session) Accept() (*Stream, error) {
	select {
	case st := <-s.accept:
		return st, nil
	case <-s.done:
		// Streams queued before the end are still handed out (they fail on use).
		select {
		case st := <-s.accept:
			return st, nil
		default:
		}
		return nil, ErrClosed
	}
}

// Run reads frames until the stream ends or fails, then ends the session. It returns nil
// on a clean end of the input.
func (s *Session) Run() error {
	var hdr [headerLen]byte
	buf := make([]byte, maxPayload)
	for {
		if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			s.fail(err)
			return err
		}
		typ, id, n := hdr[0], binary.BigEndian.Uint32(hdr[1:5]), binary.BigEndian.Uint32(hdr[5:9])
		if n > maxPayload {
			err := fmt.Errorf("mux: frame of %d bytes exceeds %d", n, maxPayload)
			s.fail(err)
			return err
		}
		p := buf[:n]
		if _, err := io.ReadFull(s.r, p); err != nil {
			err = fmt.Errorf("mux: read: %w", err)
			s.fail(err)
			return err
		}
		if err := s.handle(typ, id, p); err != nil {
			s.fail(err)
			return err
		}
	}
}

func (s *Session) handle(typ byte, id uint32, p []byte) error {
	switch typ {
	case fHello:
		select {
		case s.hello <- append([]byte(nil), p...):
		default:
		}
		return nil
	case fOpen:
		s.mu.Lock()
		_, dup := s.streams[id]
		full := len(s.streams) >= MaxStreams
		var st *Stream
		if !dup && !full {
			st = newStream(s, id)
			s.streams[id] = st
		}
		s.mu.Unlock()
		if dup {
			return fmt.Errorf("mux: stream %d opened twice", id)
		}
		if full {
			s.writeFrame(fReset, id, []byte("too many streams"))
			return nil
		}
		select {
		case s.accept <- st:
		default:
			s.forget(id)
			s.writeFrame(fReset, id, []byte("accept queue full"))
		}
		return nil
	}
	s.mu.Lock()
	st := s.streams[id]
	s.mu.Unlock()
	if st == nil {
		return nil // a stream closed here: late frames are dropped
	}
	switch typ {
	case fData:
		if !st.deliver(p) {
			st.abort("window exceeded")
		}
	case fEOF:
		st.remoteEOF()
	case fReset:
		st.remoteReset()
	case fWindow:
		if len(p) != 4 {
			return fmt.Errorf("mux: bad window frame")
		}
		st.credit(int64(binary.BigEndian.Uint32(p)))
	default:
		return fmt.Errorf("mux: unknown frame type %q", typ)
	}
	return nil
}

// fail ends the session: every stream fails and the closer is closed.
func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	if err == nil {
		err = io.EOF
	}
	s.err = err
	streams := s.streams
	s.streams = map[uint32]*Stream{}
	close(s.done)
	s.mu.Unlock()
	for _, st := range streams {
		st.sessionGone()
	}
	if s.closer != nil {
		s.closer.Close()
	}
}

// Close ends the session.
func (s *Session) Close() error {
	s.fail(ErrClosed)
	return nil
}

func (s *Session) forget(id uint32) {
	s.mu.Lock()
	delete(s.streams, id)
	s.mu.Unlock()
}

// Stream is one connection carried by a session. It is a net.Conn without deadlines.
type Stream struct {
	s  *Session
	id uint32

	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte // guarded by mu; received, unread
	unacked int64  // guarded by mu; read but not yet credited back
	sendWin int64  // guarded by mu
	eof     bool   // guarded by mu; the peer sent EOF
	reset   bool   // guarded by mu; the peer reset, or the session ended
	closed  bool   // guarded by mu; Close was called
	wclosed bool   // guarded by mu; CloseWrite or Close was called
}

func newStream(s *Session, id uint32) *Stream {
	st := &Stream{s: s, id: id, sendWin: Window}
	st.cond = sync.NewCond(&st.mu)
	return st
}

// deliver queues data; false means the peer overran its window.
func (st *Stream) deliver(p []byte) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return true
	}
	if int64(len(st.buf))+int64(len(p)) > Window {
		return false
	}
	st.buf = append(st.buf, p...)
	st.cond.Broadcast()
	return true
}

func (st *Stream) remoteEOF() {
	st.mu.Lock()
	st.eof = true
	st.cond.Broadcast()
	done := st.closed
	st.mu.Unlock()
	if done {
		st.s.forget(st.id)
	}
}

func (st *Stream) remoteReset() {
	st.mu.Lock()
	st.reset = true
	st.cond.Broadcast()
	st.mu.Unlock()
	st.s.forget(st.id)
}

func (st *Stream) sessionGone() {
	st.mu.Lock()
	st.reset = true
	st.cond.Broadcast()
	st.mu.Unlock()
}

func (st *Stream) credit(n int64) {
	st.mu.Lock()
	st.sendWin += n
	st.cond.Broadcast()
	st.mu.Unlock()
}

// reset aborts the stream locally and tells the peer.
func (st *Stream) abort(reason string) {
	st.mu.Lock()
	st.reset = true
	st.closed = true
	st.buf = nil
	st.cond.Broadcast()
	st.mu.Unlock()
	st.s.forget(st.id)
	st.s.writeFrame(fReset, st.id, []byte(reason))
}

// Read reads received data; io.EOF after the peer's EOF.
func (st *Stream) Read(p []byte) (int, error) {
	st.mu.Lock()
	for len(st.buf) == 0 && !st.eof && !st.reset && !st.closed {
		st.cond.Wait()
	}
	if len(st.buf) == 0 {
		defer st.mu.Unlock()
		switch {
		case st.closed:
			return 0, ErrClosed
		case st.eof:
			return 0, io.EOF
		default:
			return 0, ErrReset
		}
	}
	n := copy(p, st.buf)
	st.buf = st.buf[n:]
	if len(st.buf) == 0 {
		st.buf = nil
	}
	st.unacked += int64(n)
	var grant int64
	if st.unacked >= Window/4 && !st.eof {
		grant, st.unacked = st.unacked, 0
	}
	st.mu.Unlock()
	if grant > 0 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(grant))
		st.s.writeFrame(fWindow, st.id, b[:])
	}
	return n, nil
}

// Write sends p, waiting for window credit as needed.
func (st *Stream) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		st.mu.Lock()
		for st.sendWin <= 0 && !st.reset && !st.wclosed {
			st.cond.Wait()
		}
		if st.reset {
			st.mu.Unlock()
			return written, ErrReset
		}
		if st.wclosed {
			st.mu.Unlock()
			return written, ErrClosed
		}
		n := int64(min(len(p), maxPayload))
		n = min(n, st.sendWin)
		st.sendWin -= n
		st.mu.Unlock()
		if err := st.s.writeFrame(fData, st.id, p[:n]); err != nil {
			return written, err
		}
		written += int(n)
		p = p[n:]
	}
	return written, nil
}

// ReadFrom copies r to the stream in full-size frames (io.Copy would use 32 KiB writes).
func (st *Stream) ReadFrom(r io.Reader) (int64, error) {
	buf := make([]byte, maxPayload)
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := st.Write(buf[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// CloseWrite tells the peer no more data follows.
func (st *Stream) CloseWrite() error {
	st.mu.Lock()
	if st.wclosed || st.reset {
		st.mu.Unlock()
		return nil
	}
	st.wclosed = true
	st.cond.Broadcast()
	st.mu.Unlock()
	return st.s.writeFrame(fEOF, st.id, nil)
}

// Close ends the stream both ways. If the peer may still send, it is reset.
func (st *Stream) Close() error {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return nil
	}
	st.closed = true
	wasW, eof, reset := st.wclosed, st.eof, st.reset
	st.wclosed = true
	st.buf = nil
	st.cond.Broadcast()
	st.mu.Unlock()
	switch {
	case reset:
	case !eof:
		st.s.forget(st.id)
		st.s.writeFrame(fReset, st.id, []byte("closed"))
	default:
		st.s.forget(st.id)
		if !wasW {
			st.s.writeFrame(fEOF, st.id, nil)
		}
	}
	return nil
}

type addr string

func (a addr) Network() string { return "mux" }
func (a addr) String() string  { return string(a) }

// LocalAddr and RemoteAddr name the stream.
func (st *Stream) LocalAddr() net.Addr { return addr(fmt.Sprintf("mux:%d", st.id)) }

// RemoteAddr names the stream.
func (st *Stream) RemoteAddr() net.Addr { return addr(fmt.Sprintf("mux:%d", st.id)) }

// SetDeadline is not supported.
func (st *Stream) SetDeadline(time.Time) error { return os.ErrNoDeadline }

// SetReadDeadline is not supported.
func (st *Stream) SetReadDeadline(time.Time) error { return os.ErrNoDeadline }

// SetWriteDeadline is not supported.
func (st *Stream) SetWriteDeadline(time.Time) error { return os.ErrNoDeadline }

var _ net.Conn = (*Stream)(nil)
