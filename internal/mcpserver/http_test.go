package mcpserver_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func TestCheckListen(t *testing.T) {
	const token = "0123456789abcdef0123"
	for _, tc := range []struct {
		addr, token string
		loopback    bool
		ok          bool
	}{
		{"127.0.0.1:8765", "", true, true},
		{"127.0.0.2:0", "", true, true},
		{"[::1]:8765", "", true, true},
		{"localhost:8765", "", true, true},
		{"0.0.0.0:8765", "", false, false},
		{":8765", "", false, false},
		{"[::]:8765", "", false, false},
		{"192.0.2.10:8765", "", false, false},
		{"example.com:8765", "", false, false},
		{"0.0.0.0:8765", token, false, true},
		{"127.0.0.1:8765", "short", true, false},
		{"127.0.0.1", "", false, false},
	} {
		if got := mcpserver.IsLoopback(tc.addr); got != tc.loopback {
			t.Errorf("IsLoopback(%q) = %v; want %v", tc.addr, got, tc.loopback)
		}
		err := mcpserver.CheckListen(tc.addr, tc.token)
		if (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q, %q) = %v; want ok %v", tc.addr, tc.token, err, tc.ok)
		}
		if err != nil && !tc.ok && tc.token == "" && strings.Contains(tc.addr, ":") && !tc.loopback &&
			!strings.Contains(err.Error(), mcpserver.TokenEnv) {
			t.Errorf("CheckListen(%q) = %v; want it to name %s", tc.addr, err, mcpserver.TokenEnv)
		}
	}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func httpClient(t *testing.T, url, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = bearer{token, http.DefaultTransport}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "1"}, opts).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func TestHTTPBearerToken(t *testing.T) {
	const token = "s3cret-token-for-tests-0123456789"
	e := newEnv(t, envOptions{})
	ts := httptest.NewServer(e.srv.Handler(token))
	t.Cleanup(ts.Close)

	for _, tc := range []struct {
		method, auth, challenge string
	}{
		{"POST", "", `Bearer realm="hermes-sandbox"`},
		{"POST", "Bearer wrong-token-wrong-token", `error="invalid_token"`},
		{"POST", "Basic " + token, `error="invalid_token"`},
		{"POST", "Bearer " + token + "x", `error="invalid_token"`},
		{"GET", "", "Bearer"},
		{"DELETE", "Bearer nope", "invalid_token"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tc.method, ts.URL,
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), tc.challenge) {
			t.Errorf("%s with %q: status %d, WWW-Authenticate %q; want 401 and %q", tc.method, tc.auth,
				resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tc.challenge)
		}
	}
	if _, err := httpClient(t, ts.URL, "wrong-token-wrong-token", nil); err == nil {
		t.Error("a client with the wrong token connected")
	}
	cs, err := httpClient(t, ts.URL, token, nil)
	if err != nil {
		t.Fatalf("connect with the right token: %v", err)
	}
	var out mcpserver.TerminalResult
	ok(t, cs, "terminal", map[string]any{"command": "echo over-http"}, &out)
	if out.Stdout != "over-http\n" {
		t.Errorf("stdout = %q", out.Stdout)
	}
}

// Concurrent HTTP sessions each get their own sandbox session, and deleting one removes it.
func TestHTTPSessions(t *testing.T) {
	e := newEnv(t, envOptions{})
	ap := &approver{action: "accept", decision: "once"}
	ctx, cancel := context.WithCancel(t.Context())
	addrc := make(chan net.Addr, 1)
	served := make(chan error, 1)
	go func() { served <- e.srv.ListenAndServe(ctx, "127.0.0.1:0", "", func(a net.Addr) { addrc <- a }) }()
	url := "http://" + (<-addrc).String() + mcpserver.HTTPPath

	a, err := httpClient(t, url, "", &mcp.ClientOptions{ElicitationHandler: ap.handle})
	if err != nil {
		t.Fatal(err)
	}
	b, err := httpClient(t, url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ok(t, a, "terminal", map[string]any{"command": "cd /tmp && export WHO=a && sleep 0.3"}, nil)
	}()
	var out mcpserver.TerminalResult
	ok(t, b, "terminal", map[string]any{"command": "export WHO=b; sleep 0.3; pwd"}, &out)
	<-done
	ok(t, a, "terminal", map[string]any{"command": "echo $WHO; pwd"}, &out)
	if out.Stdout != "a\n/tmp\n" {
		t.Errorf("session a sees %q; want a and /tmp", out.Stdout)
	}
	ok(t, b, "terminal", map[string]any{"command": "echo $WHO; pwd"}, &out)
	if out.Stdout != "b\n"+e.work+"\n" {
		t.Errorf("session b sees %q; want b and %s", out.Stdout, e.work)
	}
	// Elicitation works over HTTP too.
	ok(t, a, "terminal", map[string]any{"command": "mkdir -p d && " + dangerous}, nil)
	if ap.count() != 1 {
		t.Errorf("asked %d times over HTTP; want 1", ap.count())
	}

	var info mcpserver.InfoResult
	ok(t, b, "sandbox_info", nil, &info)
	b.Close() // DELETE ends the session
	deadline := time.Now().Add(10 * time.Second)
	for hasSession(t, e.inner, info.Session) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if hasSession(t, e.inner, info.Session) {
		t.Errorf("session %s survives its HTTP session", info.Session)
	}
	ok(t, a, "sandbox_info", nil, &info)
	cancel()
	if err := <-served; err != nil {
		t.Errorf("ListenAndServe: %v", err)
	}
	if hasSession(t, e.inner, info.Session) {
		t.Errorf("session %s survives the server", info.Session)
	}
}

// An HTTP session idle for longer than SessionTimeout ends, and its sandbox session with it.
func TestHTTPIdleTimeout(t *testing.T) {
	e := newEnv(t, envOptions{idle: 300 * time.Millisecond})
	ts := httptest.NewServer(e.srv.Handler(""))
	t.Cleanup(ts.Close)
	cs, err := httpClient(t, ts.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	ok(t, cs, "terminal", map[string]any{"command": "true"}, nil)
	start := time.Now()
	if !hasSession(t, e.inner, info.Session) {
		t.Fatalf("session %s missing right after a command", info.Session)
	}
	for hasSession(t, e.inner, info.Session) && time.Since(start) < 10*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	if hasSession(t, e.inner, info.Session) {
		t.Errorf("idle session %s was not removed", info.Session)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("session removed after %s; want no sooner than the idle timeout", d)
	}
}

// TestMaxSessions: beyond mcp.max_sessions sessions with a sandbox, a new session's tool calls
// fail with an error naming the setting, and its sandbox is never made; once a session ends,
// the waiting one is served.
func TestMaxSessions(t *testing.T) {
	e := newEnv(t, envOptions{configure: func(c *config.Config) { c.MCP.MaxSessions = 2 }})
	ts := httptest.NewServer(e.srv.Handler(""))
	t.Cleanup(ts.Close)
	var clients []*mcp.ClientSession
	for range 3 {
		cs, err := httpClient(t, ts.URL, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cs)
	}
	var info mcpserver.InfoResult
	ok(t, clients[0], "terminal", map[string]any{"command": "true"}, nil)
	ok(t, clients[1], "sandbox_info", nil, &info)
	ok(t, clients[1], "terminal", map[string]any{"command": "true"}, nil)
	before := countSessions(t, e.inner)
	if msg := refused(t, clients[2], "terminal", map[string]any{"command": "echo third"}); !strings.Contains(msg, "mcp.max_sessions") {
		t.Errorf("terminal from a third session = %q; want an error naming mcp.max_sessions", msg)
	}
	if n := countSessions(t, e.inner); n != before {
		t.Errorf("the refused session made a sandbox session: %d sessions, %d before", n, before)
	}
	// The first two still work.
	ok(t, clients[0], "terminal", map[string]any{"command": "true"}, nil)
	clients[1].Close()
	// The ended session's place frees once its sandbox session is cleaned up.
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := call(t, clients[2], "terminal", map[string]any{"command": "echo third"})
		if !res.IsError {
			if !strings.Contains(text(res), "third") {
				t.Errorf("third session after another ended = %q; want third", text(res))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("third session still refused 10s after another ended: %s", text(res))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if hasSession(t, e.inner, info.Session) {
		t.Errorf("the ended session's sandbox %s is still there", info.Session)
	}
}

func countSessions(t *testing.T, b sandbox.Backend) int {
	t.Helper()
	infos, err := b.(sandbox.SessionManager).Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return len(infos)
}

// With --keep-sessions, an HTTP session that idles out ends but its sandbox session stays.
func TestHTTPIdleTimeoutKeepsSessions(t *testing.T) {
	e := newEnv(t, envOptions{idle: 300 * time.Millisecond, keepSessions: true})
	ts := httptest.NewServer(e.srv.Handler(""))
	t.Cleanup(ts.Close)
	cs, err := httpClient(t, ts.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	ok(t, cs, "terminal", map[string]any{"command": "export KEPT=1"}, nil)
	// The HTTP session ends (watched from the server side: a call would be activity).
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for range e.srv.MCPServer().Sessions() {
			n++
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle HTTP session never ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Its sandbox session is closed only after the MCP session ends: give that its deadline
	// by checking through a call that must fail on the ended session.
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "sandbox_info", Arguments: map[string]any{}}); err == nil {
		t.Errorf("a call on the idled-out session succeeded; want it ended")
	}
	// Close waits for every session's clean-up to finish.
	e.srv.Close()
	if !hasSession(t, e.inner, info.Session) {
		t.Errorf("sandbox session %s was removed; want it kept (keep sessions)", info.Session)
	}
}
