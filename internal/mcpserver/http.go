package mcpserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TokenEnv is the environment variable that holds the HTTP bearer token.
const TokenEnv = "HERMES_SANDBOX_MCP_TOKEN"

// MinTokenLength is the shortest bearer token accepted.
const MinTokenLength = 16

// HTTPPath is where the streamable HTTP endpoint is served.
const HTTPPath = "/mcp"

// IsLoopback reports whether a listen address (host:port) binds only to the loopback
// interface. An empty host or an unspecified address (0.0.0.0, ::) binds everywhere; a host
// name other than localhost is not trusted to be loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckListen checks a listen address and token before anything listens: a non-loopback
// address needs a token, and a token must be long enough to resist guessing.
func CheckListen(addr, token string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("mcp: listen address %q: want host:port, e.g. 127.0.0.1:8765", addr)
	}
	if token != "" && len(token) < MinTokenLength {
		return fmt.Errorf("mcp: the bearer token is %d characters; use at least %d, e.g. `export %s=$(openssl rand -hex 32)`",
			len(token), MinTokenLength, TokenEnv)
	}
	if token == "" && !IsLoopback(addr) {
		return fmt.Errorf("mcp: listening on %s exposes the sandbox beyond this machine, so it needs a bearer token: "+
			"set %s (e.g. `export %s=$(openssl rand -hex 32)`) or pass --token, or listen on 127.0.0.1", addr, TokenEnv, TokenEnv)
	}
	return nil
}

// Handler returns the streamable HTTP handler for the server's MCP endpoint. With a non-empty
// token, every request must carry `Authorization: Bearer <token>`; others get 401.
func (s *Server) Handler(token string) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{SessionTimeout: s.opts.SessionTimeout, Logger: s.log})
	return s.front(token, h)
}

// CheckTransport decides whether addr may be served over plain HTTP: a bearer key or token
// sent in clear text beyond loopback can be read by anyone on the path, and then used. TLS
// (mcp.tls_cert and mcp.tls_key) or an explicit --insecure-http (for a proxy that terminates
// TLS in front of the server) is needed there.
func CheckTransport(addr string, tls, insecure bool) error {
	if tls || insecure || IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("mcp: listening on %s over plain HTTP would send every bearer key in clear text across the network, "+
		"where anyone on the path can read and reuse it: set mcp.tls_cert and mcp.tls_key (PEM files) to serve HTTPS, "+
		"or pass --insecure-http if a TLS-terminating proxy sits in front of this server", addr)
}

// Paths served beside HTTPPath.
const (
	MetricsPath = "/metrics"
	HealthPath  = "/healthz"
	ReadyPath   = "/readyz"
)

// Mux serves the MCP endpoint, /metrics, /healthz and /readyz.
func (s *Server) Mux(token string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(HTTPPath, s.Handler(token))
	mux.HandleFunc(HealthPath, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc(ReadyPath, func(w http.ResponseWriter, r *http.Request) {
		if err := s.ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	metrics := s.metrics.handler()
	want := sha256.Sum256([]byte(token))
	mux.Handle(MetricsPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Once keys exist, the metrics (which name every key) are for the admin token only.
		if token != "" || s.keys.any() {
			scheme, given, ok := strings.Cut(r.Header.Get("Authorization"), " ")
			got := sha256.Sum256([]byte(strings.TrimSpace(given)))
			if token == "" || !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="hermes-sandbox"`)
				http.Error(w, "unauthorized: "+MetricsPath+" needs the admin token ("+TokenEnv+")", http.StatusUnauthorized)
				return
			}
		}
		metrics.ServeHTTP(w, r)
	}))
	return mux
}

// ready reports whether the server should get traffic: not draining, and the backend
// answers (when it can be asked).
func (s *Server) ready(ctx context.Context) error {
	if s.isDraining() {
		return errors.New("shutting down")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var err error
	switch b := s.backend.(type) {
	case sandbox.Checker:
		err = b.Check(ctx)
	case sandbox.SessionManager:
		// Listing the sessions asks the engine, cluster or API behind the backend.
		_, err = b.Sessions(ctx)
	}
	if err != nil {
		return fmt.Errorf("backend %s: %w", s.backend.Name(), err)
	}
	return nil
}

// drainTimeout is how long running calls may finish after the server is told to stop.
func (s *Server) drainTimeout() time.Duration {
	if s.opts.DrainTimeout > 0 {
		return s.opts.DrainTimeout
	}
	if s.cfg.MCP.DrainTimeout > 0 {
		return s.cfg.MCP.DrainTimeout
	}
	return 30 * time.Second
}

// ListenAndServe serves MCP over streamable HTTP (HTTPS with TLSCert and TLSKey) at
// addr/mcp, with /metrics, /healthz and /readyz, until ctx is done. Then it drains: it stops
// accepting connections, refuses new sessions and calls, lets running tool calls finish for
// up to the drain timeout, then ends every session (cancelling what still runs, and unless
// KeepSessions removing the sandbox sessions). ready, if set, is called with the bound
// address once the server accepts connections.
func (s *Server) ListenAndServe(ctx context.Context, addr, token string, ready func(net.Addr)) error {
	if err := CheckListen(addr, token); err != nil {
		return err
	}
	certFile, keyFile := s.opts.TLSCert, s.opts.TLSKey
	if certFile == "" && keyFile == "" {
		certFile, keyFile = s.cfg.MCP.TLSCert, s.cfg.MCP.TLSKey
	}
	if (certFile == "") != (keyFile == "") {
		return errors.New("mcp: a TLS certificate needs its key and a key its certificate (mcp.tls_cert, mcp.tls_key)")
	}
	useTLS := certFile != ""
	if token != "" || s.keys.any() {
		if err := CheckTransport(addr, useTLS, s.opts.InsecureHTTP); err != nil {
			return err
		}
	}
	var tlsConf *tls.Config
	if useTLS {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return fmt.Errorf("mcp: TLS certificate %s and key %s: %w", certFile, keyFile, err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcp: listen on %s: %w", addr, err)
	}
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	// The server's own complaints (a TLS handshake refused, a plain-HTTP client at an HTTPS
	// port) go to the structured log, not to the process's stderr as bare lines.
	srv := &http.Server{Handler: s.Mux(token), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	// The watcher's last act is to write the keys' last use: it is done before this returns, so
	// nothing writes beside the keys file once the server has stopped.
	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() { defer close(watched); s.watchKeys(wctx) }()
	defer func() { stopWatch(); <-watched }()
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	s.drain(srv)
	if err == nil {
		err = <-errc
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// drain stops srv taking connections, waits for running tool calls up to the drain timeout,
// then ends every session and closes what connections remain.
func (s *Server) drain(srv *http.Server) {
	s.draining.Store(true)
	timeout := s.drainTimeout()
	s.log.Info("draining", "running_calls", s.inflight.Load(), "drain_timeout", timeout.String())
	// Shutdown closes the listener at once, then waits for connections to go idle; the
	// sessions' event streams keep theirs busy until the sessions end below.
	shut := make(chan struct{})
	sctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	go func() {
		defer close(shut)
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
	}()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	for (s.inflight.Load() > 0 || s.posts.Load() > 0) && time.Now().Before(deadline) {
		<-tick.C
	}
	tick.Stop()
	if n := s.inflight.Load(); n > 0 {
		s.log.Warn("drain timeout: cancelling running calls", "running_calls", n)
	}
	// Cancel first: a session does not end (and so would not cancel its calls) while one of
	// its calls is still being handled.
	s.cancelCalls()
	s.Close()
	<-shut
}

// cancelCalls cancels every running tool call.
func (s *Server) cancelCalls() {
	s.mu.Lock()
	var all []*session
	for _, st := range s.sessions {
		all = append(all, st)
	}
	s.mu.Unlock()
	for _, st := range all {
		st.mu.Lock()
		for _, cancel := range st.cancels {
			cancel()
		}
		st.mu.Unlock()
	}
}
