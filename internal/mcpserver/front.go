package mcpserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Headers the front door reads or sets.
const (
	sessionIDHeader = "Mcp-Session-Id"
	requestIDHeader = "X-Request-Id"
)

// identity is who an HTTP request comes from.
type identity struct {
	name string // key name, AdminName, or "" when the server has neither keys nor token
	key  *Key   // nil for the admin token and for an open server
}

type identityKey struct{}

// bindings remembers which identity opened each HTTP MCP session: a session answers only
// the identity that opened it, and for any other the session does not exist.
type bindings struct {
	mu sync.Mutex
	m  map[string]string // session id → identity name
}

func (b *bindings) get(id string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.m[id]
	return n, ok
}

func (b *bindings) set(id, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]string{}
	}
	b.m[id] = name
}

// prune forgets sessions that no longer exist and counts, per identity, those that do.
func (b *bindings) prune(live map[string]bool) map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := map[string]int{}
	for id, name := range b.m {
		if !live[id] {
			delete(b.m, id)
			continue
		}
		n[name]++
	}
	return n
}

// liveSessions are the ids of the MCP sessions the server holds.
func (s *Server) liveSessions() map[string]bool {
	live := map[string]bool{}
	for ss := range s.mcp.Sessions() {
		live[ss.ID()] = true
	}
	return live
}

// front is the HTTP door in front of the MCP handler: a request id, authentication (the admin
// token or a key, once either is configured), the binding of sessions to keys, the key's
// session limit, and a structured log line per request.
func (s *Server) front(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	// The SDK binds a session to TokenInfo.UserID too, and gives tool handlers the TokenInfo.
	withInfo := auth.RequireBearerToken(func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		id, _ := r.Context().Value(identityKey{}).(identity)
		return &auth.TokenInfo{UserID: id.name, Extra: map[string]any{"key": id.key}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rid := r.Header.Get(requestIDHeader)
		if !validRequestID(rid) {
			rid = newRequestID()
		}
		r.Header.Set(requestIDHeader, rid)
		w.Header().Set(requestIDHeader, rid)
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		var who identity
		defer func() {
			s.log.Info("http request", "request_id", rid, "key", who.name, "method", r.Method,
				"path", r.URL.Path, "status", rec.status, "duration_ms", time.Since(start).Milliseconds())
		}()

		if s.keys != nil {
			// A stat a request: a revoked key is refused at its very next request.
			if gone, _ := s.keys.refresh(true); len(gone) > 0 {
				s.closeKeys(gone)
			}
		}
		needAuth := token != "" || s.keys.any()
		if needAuth {
			auth := r.Header.Get("Authorization")
			scheme, given, ok := strings.Cut(auth, " ")
			given = strings.TrimSpace(given)
			ok = ok && strings.EqualFold(scheme, "Bearer")
			got := sha256.Sum256([]byte(given))
			switch {
			case ok && token != "" && subtle.ConstantTimeCompare(got[:], want[:]) == 1:
				who = identity{name: AdminName}
			case ok && s.keys != nil:
				if k := s.keys.verify(given); k != nil {
					who = identity{name: k.Name, key: k}
				}
			}
			if who.name == "" {
				challenge := `Bearer realm="hermes-sandbox"`
				if auth != "" {
					challenge += `, error="invalid_token"`
				}
				w.Header().Set("WWW-Authenticate", challenge)
				http.Error(rec, "unauthorized: send Authorization: Bearer <key> (a key from `hermes-sandbox mcp keys add`, or the admin token "+TokenEnv+")", http.StatusUnauthorized)
				return
			}
		}
		if who.key != nil && !who.key.AllowsBackend(s.backend.Name()) {
			http.Error(rec, "forbidden: key "+strconv.Quote(who.name)+" may use the backends "+strings.Join(who.key.Backends, ", ")+
				"; this server runs "+s.backend.Name(), http.StatusForbidden)
			return
		}

		sid := r.Header.Get(sessionIDHeader)
		if sid != "" {
			// Another key's session answers exactly as a session that does not exist.
			if owner, ok := s.binds.get(sid); !ok || owner != who.name {
				http.Error(rec, "session not found", http.StatusNotFound)
				return
			}
		} else if r.Method == http.MethodPost {
			if s.isDraining() {
				rec.Header().Set("Retry-After", "5")
				http.Error(rec, "the server is shutting down: it accepts no new sessions", http.StatusServiceUnavailable)
				return
			}
			if who.key != nil && who.key.MaxSessions > 0 {
				open := s.binds.prune(s.liveSessions())[who.name]
				if open >= who.key.MaxSessions {
					q := &QuotaError{Key: who.name, Limit: "max_sessions", Value: who.key.MaxSessions, RetryAfter: 5 * time.Second,
						Reset: "it frees when one of the key's sessions ends (the client closes it, or it is idle for mcp.session_idle_timeout)"}
					s.metrics.quota(who.name, q.Limit)
					rec.Header().Set("Retry-After", strconv.Itoa(q.retrySeconds()))
					http.Error(rec, "too many requests: "+q.Error(), http.StatusTooManyRequests)
					return
				}
			}
			rec.bind = func(id string) { s.binds.set(id, who.name) }
		}
		if r.Method == http.MethodPost {
			// The drain waits for these: a call's answer is written here, after the call.
			s.posts.Add(1)
			defer s.posts.Add(-1)
		}
		r = r.WithContext(context.WithValue(r.Context(), identityKey{}, who))
		if who.name == "" {
			next.ServeHTTP(rec, r)
			return
		}
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer -")
		}
		withInfo.ServeHTTP(rec, r)
	})
}

// recorder notes the status, and binds a new session to its identity when the SDK's answer
// to an initialize names the session.
type recorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	bind        func(id string)
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.wroteHeader = true
		r.status = code
		if id := r.Header().Get(sessionIDHeader); id != "" && r.bind != nil && code < 300 {
			r.bind(id)
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func validRequestID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func newRequestID() string { return shortID() + shortID() }

// closeKeys ends the MCP sessions of revoked or expired keys; ending a session removes its
// sandbox session (unless KeepSessions).
func (s *Server) closeKeys(names []string) {
	gone := map[string]bool{}
	for _, n := range names {
		gone[n] = true
	}
	for ss := range s.mcp.Sessions() {
		if owner, ok := s.binds.get(ss.ID()); ok && gone[owner] {
			s.log.Info("closing the session of a revoked or expired key", "key", owner)
			go func(ss *mcp.ServerSession) {
				ss.Close()
				s.endSession(ss)
			}(ss)
		}
	}
}

// watchKeys reloads the keys file every second until ctx is done, so a revoked key's
// sessions close even when it sends nothing more, and flushes the keys' last use.
func (s *Server) watchKeys(ctx context.Context) {
	if s.keys == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.keys.flushLastUse()
			return
		case <-t.C:
			if gone, err := s.keys.refresh(true); err != nil {
				s.log.Warn("reload keys", "err", err)
			} else if len(gone) > 0 {
				s.closeKeys(gone)
			}
			s.keys.flushLastUse()
			s.binds.prune(s.liveSessions()) // forget ended sessions
		}
	}
}
