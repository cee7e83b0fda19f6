package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"io"
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
	// admissionHeader carries, from the front door to keyGate, the ticket of a tool call the
	// front door admitted under its key's limits. A client's own is deleted on arrival.
	admissionHeader = "X-Hermes-Sandbox-Admission"
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
		r.Header.Del(admissionHeader) // only the front door sets it
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
		if r.Method == http.MethodPost && sid != "" && who.key != nil && (who.key.MaxConcurrent > 0 || who.key.RatePerMinute > 0) {
			release, refused := s.admitCall(rec, r, who)
			if refused {
				return
			}
			defer release()
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

// maxCallBody bounds the body of a POST the front door reads to find a tool call.
const maxCallBody = 64 << 20

// admitCall applies a key's max_concurrent and rate limits to a POST that holds one tool
// call, where a refusal can still be an HTTP answer: 429 with Retry-After, and a JSON-RPC
// error body that names the limit and when it resets. An admitted call's slot is handed to
// keyGate through a ticket (admissionHeader) and held until the call ends there; release
// frees it if keyGate never took it. Anything else (a batch, another method, a tool outside
// the key's scope, a draining server) passes untouched, and keyGate applies the limits with
// an MCP error.
func (s *Server) admitCall(w http.ResponseWriter, r *http.Request, who identity) (release func(), refused bool) {
	orig := r.Body
	body, err := io.ReadAll(io.LimitReader(orig, maxCallBody+1))
	// The handler behind reads the body again: what was read, then whatever is left.
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), orig), orig}
	if err != nil || len(body) > maxCallBody || s.isDraining() {
		return func() {}, false
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" || len(msg.ID) == 0 || !who.key.AllowsTool(msg.Params.Name) {
		return func() {}, false
	}
	done, q := s.limits.startCall(who.key, time.Now())
	if q != nil {
		s.metrics.quota(who.name, q.Limit)
		s.log.Info("tool call over quota", "key", who.name, "request_id", r.Header.Get(requestIDHeader), "tool", msg.Params.Name, "limit", q.Limit)
		answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID,
			"error": map[string]any{"code": CodeQuota, "message": q.Error(), "data": q.data()}})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", strconv.Itoa(q.retrySeconds()))
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(append(answer, '\n'))
		return nil, true
	}
	ticket := s.admits.put(done)
	r.Header.Set(admissionHeader, ticket)
	return func() {
		if done := s.admits.take(ticket); done != nil {
			done()
		}
	}, false
}

// admissions are the tool calls the front door admitted and keyGate has not yet taken.
type admissions struct {
	mu sync.Mutex
	m  map[string]func() // ticket → the call's done; guarded by mu
}

func (a *admissions) put(done func()) string {
	ticket := newRequestID() + newRequestID()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]func(){}
	}
	a.m[ticket] = done
	return ticket
}

// take returns the done of ticket's call and forgets it, or nil.
func (a *admissions) take(ticket string) func() {
	if ticket == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	done := a.m[ticket]
	delete(a.m, ticket)
	return done
}
