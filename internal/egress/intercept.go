package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// bufConn is the client's connection under the proxy's TLS server. It reads first what a
// bufio.Reader already holds (the client's TLS hello, sent right after its CONNECT), and
// while batching it gathers the records a TLS write makes (one per 16 KB) to send them with
// one write(2) in flush. Only the goroutine serving the connection writes.
type bufConn struct {
	net.Conn
	r        *bufio.Reader
	batching bool
	out      []byte
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *bufConn) Write(p []byte) (int, error) {
	if c.batching {
		c.out = append(c.out, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// batchWriter writes to the TLS connection over c, each Write's records in one write(2).
type batchWriter struct {
	tc *tls.Conn
	c  *bufConn
}

func (w batchWriter) Write(p []byte) (int, error) {
	w.c.batching = true
	n, err := w.tc.Write(p)
	w.c.batching = false
	if len(w.c.out) > 0 {
		if _, ferr := w.c.Conn.Write(w.c.out); err == nil {
			err = ferr
		}
		w.c.out = w.c.out[:0]
	}
	return n, err
}

// readAhead reads an upstream connection through a large buffer: TLS reads a record at a
// time, and this gets as many records as have arrived with one read(2).
type readAhead struct {
	net.Conn
	r *bufio.Reader
}

func (c *readAhead) Read(p []byte) (int, error) { return c.r.Read(p) }

// transport is the proxy's client for intercepted hosts: it connects through p.dial (so the
// resolver, egress.hosts and the address checks apply) and verifies the server normally,
// against Options.UpstreamRoots or this host's trust (which honours SSL_CERT_FILE).
func (p *Proxy) transport() *http.Transport {
	p.trOnce.Do(func() {
		p.tr = &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				h, ps, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				port, err := strconv.Atoi(ps)
				if err != nil {
					return nil, err
				}
				ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
				defer cancel()
				c, err := p.dial(ctx, h, port)
				if err != nil {
					return nil, err
				}
				return &readAhead{Conn: c, r: bufio.NewReaderSize(c, 256<<10)}, nil
			},
			TLSClientConfig: &tls.Config{RootCAs: p.opts.UpstreamRoots, MinVersion: tls.VersionTLS12,
				// A new upstream connection resumes the last session instead of a full handshake.
				ClientSessionCache: tls.NewLRUClientSessionCache(64)},
			TLSHandshakeTimeout: p.opts.DialTimeout,
			// A request body (a git push) goes up in full records, not 4 KB ones.
			WriteBufferSize:       64 << 10,
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
			ForceAttemptHTTP2:     false,
			DisableCompression:    true, // pass the client's Accept-Encoding and the body through as they are
		}
	})
	return p.tr
}

// intercept serves a CONNECT to a brokered host: it answers the CONNECT, terminates the
// client's TLS with a certificate for host from the session's CA, and forwards each HTTP/1.1
// request over a verified TLS connection of its own, with the session's placeholders replaced
// for host. Each request is an event (ev is the CONNECT's). The client's TLS server name, when
// it sends one, must be host.
func (p *Proxy) intercept(c net.Conn, br *bufio.Reader, b *Broker, host string, port int, ev Event, record func(Event)) {
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	var badSNI string
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		// Full-size records from the first byte: the client is on this host or its relay,
		// where small first records (for a slow start over the internet) only cost writes.
		DynamicRecordSizingDisabled: true,
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if h.ServerName != "" && !strings.EqualFold(strings.TrimSuffix(h.ServerName, "."), host) {
				badSNI = h.ServerName
				return nil, fmt.Errorf("the TLS server name %q differs from the CONNECT host", h.ServerName)
			}
			return b.leaf(host)
		},
	}
	bc := &bufConn{Conn: c, r: br}
	tc := tls.Server(bc, cfg)
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(headerWait))
	if err := tc.Handshake(); err != nil {
		ev.Decision = Allowed
		if badSNI != "" {
			ev.Decision, ev.Reason = Denied, fmt.Sprintf("the TLS server name %q differs from the CONNECT host", badSNI)
		} else {
			ev.Error = "TLS with the client (does the sandbox trust the session's CA?): " + err.Error()
		}
		record(ev)
		return
	}
	tc.SetDeadline(time.Time{})
	cbr := bufio.NewReaderSize(tc, 32<<10)
	authority := host
	if port != 443 {
		authority = net.JoinHostPort(host, strconv.Itoa(port))
	}
	for {
		tc.SetReadDeadline(time.Now().Add(headerWait))
		req, err := http.ReadRequest(cbr)
		tc.SetReadDeadline(time.Time{})
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				writeError(tc, http.StatusBadRequest, "hermes-sandbox egress proxy: bad request: "+err.Error()+"\n")
			}
			return
		}
		if !p.interceptOne(tc, bc, req, b, host, port, authority, ev, record) {
			return
		}
	}
}

// interceptOne forwards one request read from the client's TLS connection and reports
// whether the connection can carry another.
func (p *Proxy) interceptOne(tc *tls.Conn, bc *bufConn, req *http.Request, b *Broker, host string, port int, authority string, ev Event, record func(Event)) bool {
	start := time.Now()
	ev.Method, ev.Decision, ev.Reason, ev.Error = req.Method, Allowed, "", ""
	// The request goes where the CONNECT said, whatever its Host header claims.
	req.URL.Scheme, req.URL.Host, req.Host = "https", authority, authority
	req.RequestURI = ""
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		io.WriteString(tc, "HTTP/1.1 100 Continue\r\n\r\n")
		req.Header.Del("Expect")
	}
	keep := !req.Close
	// A kept-alive connection follows the settings too: each request is decided on, and
	// rewritten, with those in force when it comes.
	p.noteChange()
	if reason := p.decide(host, port); reason != "" {
		ev.Decision, ev.Reason, ev.Duration = Denied, reason, time.Since(start)
		writeError(tc, http.StatusForbidden, p.refusal(host, port, reason))
		record(ev)
		return false
	}
	if p.opts.Brokers != nil {
		b = p.broker()
	}
	dropHop(req.Header)
	used, leaked := b.rewrite(req.Header, host, port)
	ev.Reason = exfilReason(leaked)
	ev.Secrets = used
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	body := &countReader{r: req.Body}
	req.Body = struct {
		io.Reader
		io.Closer
	}{body, req.Body}
	resp, err := p.transport().RoundTrip(req.WithContext(ctx))
	if err != nil {
		ev.Error = err.Error()
		ev.BytesUp, ev.Duration = body.n, time.Since(start)
		writeError(tc, http.StatusBadGateway, fmt.Sprintf("hermes-sandbox egress proxy: %s is allowed but cannot be reached: %v\n", authority, err))
		record(ev)
		return false
	}
	dropHop(resp.Header)
	resp.Close = !keep
	batch := batchBufs.Get().(*[]byte)
	defer batchBufs.Put(batch)
	cw := &clientWriter{w: batchWriter{tc: tc, c: bc}, buf: (*batch)[:0]}
	down := &countReader{r: resp.Body}
	closer := io.Closer(resp.Body)
	if resp.Body != http.NoBody {
		pu := startPump(resp.Body, cancel, cw.idle)
		cw.ready = pu.ready
		down.r, closer = pu, pu
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{down, closer}
	err = resp.Write(cw)
	if err == nil {
		err = cw.flush()
	}
	resp.Body.Close()
	ev.BytesUp, ev.BytesDown, ev.Duration = body.n, down.n, time.Since(start)
	if err != nil {
		ev.Error = err.Error()
	}
	record(ev)
	return err == nil && keep
}

// clientBatch is how much of a response clientWriter gathers at most before it writes.
const clientBatch = 128 << 10

// batchBufs holds clientWriter's buffers.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, clientBatch); return &b }}

// clientWriter writes a response to the client's TLS connection in batches: it gathers up to
// clientBatch bytes while more of the body is at hand (ready), and writes as soon as the
// upstream has nothing more ready, so that a response that streams (server-sent events, a git
// server's progress) reaches the client as it comes, and a download that arrives faster than
// it is written goes out in large writes. Each batch's TLS records go out with one write(2).
type clientWriter struct {
	w     batchWriter
	buf   []byte
	ready func() bool // nil: nothing more is coming
	// reading is set while ReadFrom reads into buf: idle must not write buf then.
	reading bool
	err     error
}

func (cw *clientWriter) flush() error {
	if cw.err == nil && len(cw.buf) > 0 {
		_, cw.err = cw.w.Write(cw.buf)
		cw.buf = cw.buf[:0]
	}
	return cw.err
}

// idle is called before the body's reader waits for the upstream: what is gathered goes out.
func (cw *clientWriter) idle() error {
	if cw.reading {
		return nil // ReadFrom wrote it before reading
	}
	return cw.flush()
}

func (cw *clientWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if len(cw.buf) == cap(cw.buf) {
			if err := cw.flush(); err != nil {
				return n, err
			}
		}
		m := copy(cw.buf[len(cw.buf):cap(cw.buf)], p)
		cw.buf, p, n = cw.buf[:len(cw.buf)+m], p[m:], n+m
	}
	return n, cw.err
}

// ReadFrom reads a body of known length straight into the batch (net/http copies one with it).
func (cw *clientWriter) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	for {
		if len(cw.buf) == cap(cw.buf) || (len(cw.buf) > 0 && (cw.ready == nil || !cw.ready())) {
			if err := cw.flush(); err != nil {
				return n, err
			}
		}
		cw.reading = true
		m, err := r.Read(cw.buf[len(cw.buf):cap(cw.buf)])
		cw.reading = false
		cw.buf, n = cw.buf[:len(cw.buf)+m], n+int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// pump reads a response body on its own goroutine, up to pumpDepth reads ahead of its
// reader: the upstream's TLS records are decrypted on one core while the client's are
// encrypted and written on another. Its reader calls idle before it waits for the upstream.
// Close stops the goroutine and waits for it (abort ends a read from the upstream in progress).
type pump struct {
	ch     chan pumpChunk
	free   chan []byte
	quit   chan struct{}
	done   chan struct{}
	body   io.Closer
	abort  func()
	idle   func() error
	cur    []byte // the unread part of the chunk in hand
	buf    []byte // that chunk's buffer, handed back when it is read
	err    error  // the body's end (io.EOF) or error, once a chunk brought it
	closed bool
}

type pumpChunk struct {
	b   []byte
	err error
}

const (
	pumpDepth     = 16
	pumpChunkSize = 16 << 10 // a TLS record's payload at most: what one read of the body returns
)

// startPump starts the goroutine that reads body; Close stops it.
func startPump(body io.ReadCloser, abort func(), idle func() error) *pump {
	p := &pump{ch: make(chan pumpChunk, pumpDepth), free: make(chan []byte, pumpDepth+2), quit: make(chan struct{}),
		done: make(chan struct{}), body: body, abort: abort, idle: idle}
	go p.run(body)
	return p
}

func (p *pump) run(r io.Reader) {
	defer close(p.done)
	for {
		var b []byte
		select {
		case b = <-p.free:
		default:
			b = make([]byte, pumpChunkSize)
		}
		n, err := r.Read(b)
		select {
		case p.ch <- pumpChunk{b[:n], err}:
		case <-p.quit:
			return
		}
		if err != nil {
			return
		}
	}
}

// ready reports whether Read can return without waiting for the upstream.
func (p *pump) ready() bool { return len(p.cur) > 0 || p.err != nil || len(p.ch) > 0 }

func (p *pump) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.closed {
			return 0, net.ErrClosed
		}
		if p.err != nil {
			return 0, p.err
		}
		if p.buf != nil {
			select {
			case p.free <- p.buf:
			default:
			}
			p.buf = nil
		}
		var c pumpChunk
		select {
		case c = <-p.ch:
		default:
			if err := p.idle(); err != nil {
				return 0, err
			}
			c = <-p.ch
		}
		p.cur, p.buf, p.err = c.b, c.b[:cap(c.b)], c.err
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

func (p *pump) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	close(p.quit)
	if p.err == nil {
		p.abort() // the goroutine may be waiting for the upstream
	}
	<-p.done
	return p.body.Close()
}
