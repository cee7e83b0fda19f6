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
	down := &countReader{r: resp.Body}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{down, resp.Body}
	bw := bufio.NewWriterSize(batchWriter{tc: tc, c: bc}, 128<<10)
	err = resp.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	resp.Body.Close()
	ev.BytesUp, ev.BytesDown, ev.Duration = body.n, down.n, time.Since(start)
	if err != nil {
		ev.Error = err.Error()
	}
	record(ev)
	return err == nil && keep
}
