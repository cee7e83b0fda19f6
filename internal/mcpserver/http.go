package mcpserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{SessionTimeout: s.opts.SessionTimeout, Logger: s.log})
	if token != "" {
		h = requireBearer(token, h)
	}
	return h
}

// requireBearer checks the Authorization header in constant time before next sees the request.
func requireBearer(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		scheme, given, ok := strings.Cut(auth, " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(given)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			challenge := `Bearer realm="hermes-sandbox"`
			if auth != "" {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "unauthorized: send Authorization: Bearer <token> ("+TokenEnv+")", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ListenAndServe serves MCP over streamable HTTP at http://addr/mcp until ctx is done, then
// ends every session (closing, and unless KeepSessions removing, their sandbox sessions).
// ready, if set, is called with the bound address once the server accepts connections.
func (s *Server) ListenAndServe(ctx context.Context, addr, token string, ready func(net.Addr)) error {
	if err := CheckListen(addr, token); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcp: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(HTTPPath, s.Handler(token))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	// Sessions first: their open event streams would otherwise hold Shutdown up.
	s.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		srv.Close()
	}
	if err == nil {
		err = <-errc
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
