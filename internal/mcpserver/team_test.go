package mcpserver_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
)

const adminToken = "admin-token-for-tests-0123456789"

// teamServer serves e on loopback with keys from keysFile and the admin token.
func teamServer(t *testing.T, e *env) (url string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	addrc := make(chan net.Addr, 1)
	served := make(chan error, 1)
	go func() {
		served <- e.srv.ListenAndServe(ctx, "127.0.0.1:0", adminToken, func(a net.Addr) { addrc <- a })
	}()
	select {
	case a := <-addrc:
		url = "http://" + a.String()
	case err := <-served:
		t.Fatalf("ListenAndServe: %v", err)
	}
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-served })
		return err
	}
	t.Cleanup(func() { stop() })
	return url, stop
}

// post sends one raw JSON-RPC message and returns the status, a header and the body.
func post(t *testing.T, url, key, session, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func metricsText(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url+mcpserver.MetricsPath, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics with the admin token: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// metric reads one sample's value from Prometheus text, or -1 when absent.
func metric(text, name string, labels ...string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(line, l)
		}
		if all {
			f, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			return f
		}
	}
	return -1
}

// Two keys with different scopes and limits, through the SDK client: scope refusals,
// isolation, quotas and recovery, metrics, the key in the audit log, and revocation.
func TestTeamKeys(t *testing.T) {
	keys := filepath.Join(t.TempDir(), mcpserver.KeysFileName)
	alice, err := mcpserver.AddKey(keys, mcpserver.Key{Name: "alice", Tools: []string{"terminal", "sandbox_info"},
		MaxConcurrent: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	bob, err := mcpserver.AddKey(keys, mcpserver.Key{Name: "bob", MaxSessions: 1, RatePerMinute: 6}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{keysFile: keys})
	base, stop := teamServer(t, e)
	url := base + mcpserver.HTTPPath

	// Keys exist: loopback needs one too.
	if code, _, _ := post(t, url, "", "", initBody); code != http.StatusUnauthorized {
		t.Errorf("no key: status %d; want 401", code)
	}
	if code, _, _ := post(t, url, alice+"x", "", initBody); code != http.StatusUnauthorized {
		t.Errorf("a wrong key: status %d; want 401", code)
	}
	if _, err := httpClient(t, url, "hsk_nope_nope", nil); err == nil {
		t.Error("a client with a made-up key connected")
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+mcpserver.MetricsPath, nil)
	req.Header.Set("Authorization", "Bearer "+bob)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics with a key: %v %v; want 401 (admin token only)", resp.StatusCode, err)
	}

	a, err := httpClient(t, url, alice, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := httpClient(t, url, bob, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Scopes: alice sees and may call only her two tools.
	if got := strings.Join(toolNames(t, a), ","); got != "sandbox_info,terminal" {
		t.Errorf("alice's tools = %s; want sandbox_info,terminal", got)
	}
	if msg := refused(t, a, "write_file", map[string]any{"path": "x", "content": "y"}); !strings.Contains(msg, `key "alice" may call only terminal, sandbox_info`) {
		t.Errorf("write_file with alice's key: %q", msg)
	}
	// Isolation: bob's working directory and exports are not in alice's session. (The local
	// backend shares the host's files between sessions; the container backends do not.)
	ok(t, b, "write_file", map[string]any{"path": "bobs.txt", "content": "secret of bob"}, nil)
	var out mcpserver.TerminalResult
	ok(t, b, "terminal", map[string]any{"command": "cd /tmp && export BOBVAR='note of bob'"}, &out)
	ok(t, a, "terminal", map[string]any{"command": "echo \"$BOBVAR\"; pwd"}, &out)
	if out.Stdout != "\n"+e.work+"\n" {
		t.Errorf("alice sees bob's session: %q", out.Stdout)
	}
	// Another key's session id gets exactly the answer of a session that does not exist.
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	codeOther, _, bodyOther := post(t, url, alice, b.ID(), list)
	codeNone, _, bodyNone := post(t, url, alice, "NOSUCHSESSION0000000000000000000", list)
	if codeOther != http.StatusNotFound || codeOther != codeNone || bodyOther != bodyNone {
		t.Errorf("alice with bob's session: %d %q; with no session: %d %q; want the same 404", codeOther, bodyOther, codeNone, bodyNone)
	}
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"cat bobs.txt"}}}`
	if code, _, body := post(t, url, alice, b.ID(), call); code != http.StatusNotFound || strings.Contains(body, "secret") {
		t.Errorf("terminal in bob's session with alice's key: %d %q; want 404", code, body)
	}
	if code, _, _ := post(t, url, adminToken, b.ID(), list); code != http.StatusNotFound {
		t.Errorf("the admin token in bob's session: %d; want 404 (sessions are bound to their key)", code)
	}

	// max_sessions: bob holds his one session, so a second is refused with 429 and Retry-After.
	code, hdr, body := post(t, url, bob, "", initBody)
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || !strings.Contains(body, "max_sessions") {
		t.Errorf("bob's second session: %d Retry-After %q %q; want 429 naming max_sessions", code, hdr.Get("Retry-After"), body)
	}

	// max_concurrent: while alice runs one command, her second (from another session) is
	// refused with an MCP error naming the limit; the first is not disturbed; bob is not slowed.
	a2, err := httpClient(t, url, alice, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok(t, a2, "terminal", map[string]any{"command": "true"}, nil)
	started := filepath.Join(e.work, "started")
	running := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "terminal",
			Arguments: map[string]any{"command": "touch " + started + "; sleep 1.5; echo finished"}})
		running <- res
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !exists(started) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	second := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"echo second"}}}`
	code, hdr, body = post(t, url, alice, a2.ID(), second)
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || !strings.Contains(body, "max_concurrent") ||
		!strings.Contains(body, "retry in") || !strings.Contains(body, strconv.Itoa(mcpserver.CodeQuota)) {
		t.Errorf("alice's second concurrent call: %d Retry-After %q %q; want 429 with a quota error naming max_concurrent and when to retry",
			code, hdr.Get("Retry-After"), body)
	}
	t0 := time.Now()
	ok(t, b, "terminal", map[string]any{"command": "echo bob"}, &out)
	if d := time.Since(t0); d > time.Second {
		t.Errorf("bob's call took %v while alice was at her limit", d)
	}
	if res := <-running; res == nil || res.IsError || !strings.Contains(text(res), "finished") {
		t.Errorf("alice's running command was disturbed: %v", res)
	}
	ok(t, a2, "terminal", map[string]any{"command": "echo again"}, &out) // recovered
	if out.Stdout != "again\n" {
		t.Errorf("after the limit freed: %q", out.Stdout)
	}

	// rate: bob has 6 calls a minute and has used 3 (write_file, terminal twice).
	for range 3 {
		ok(t, b, "sandbox_info", nil, nil)
	}
	_, err = b.CallTool(t.Context(), &mcp.CallToolParams{Name: "sandbox_info"})
	if err == nil || !strings.Contains(err.Error(), http.StatusText(http.StatusTooManyRequests)) {
		t.Errorf("bob's 7th call in a minute: %v; want HTTP 429 (Too Many Requests)", err)
	}

	// Metrics match what was done.
	m := metricsText(t, base)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"hermes_sandbox_mcp_quota_rejections_total", []string{`key="alice"`, `limit="max_concurrent"`}, 1},
		{"hermes_sandbox_mcp_quota_rejections_total", []string{`key="bob"`, `limit="max_sessions"`}, 1},
		{"hermes_sandbox_mcp_quota_rejections_total", []string{`key="bob"`, `limit="rate"`}, 1},
		{"hermes_sandbox_mcp_gate_denials_total", []string{`key="alice"`, `reason="key-scope"`}, 1},
		{"hermes_sandbox_mcp_tool_calls_total", []string{`key="alice"`, `tool="terminal"`, `verdict="allowed"`, `exit_class="0"`}, 4},
		{"hermes_sandbox_mcp_tool_calls_total", []string{`key="bob"`, `tool="terminal"`, `verdict="allowed"`, `exit_class="0"`}, 2},
		{"hermes_sandbox_mcp_tool_calls_total", []string{`key="bob"`, `tool="sandbox_info"`}, 3},
		{"hermes_sandbox_mcp_active_sessions", []string{`key="alice"`}, 2},
		{"hermes_sandbox_mcp_active_sessions", []string{`key="bob"`}, 1},
		{"hermes_sandbox_mcp_tool_call_duration_seconds_count", []string{`key="alice"`, `tool="terminal"`}, 4},
	} {
		if got := metric(m, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v; want %v", c.name, c.labels, got, c.want)
		}
	}
	if regexp.MustCompile(`session="`).MatchString(m) {
		t.Error("a metric is labelled by session")
	}

	// The audit log names the key of every call.
	keysSeen := map[string]int{}
	for _, r := range e.records() {
		if r.Tool != "" && r.Session != "" {
			keysSeen[r.Key]++
		}
	}
	if keysSeen["alice"] == 0 || keysSeen["bob"] == 0 || keysSeen[""] != 0 {
		for _, r := range e.records() {
			t.Logf("%+v", r)
		}
		t.Errorf("audit records by key: %v; want alice and bob, none without a key", keysSeen)
	}

	// Revocation mid-session: bob's next request is refused, and his sandbox session goes.
	var info mcpserver.InfoResult
	ok(t, a, "sandbox_info", nil, &info) // alice's, kept
	bobSession := ""
	for _, r := range e.records() {
		if r.Key == "bob" {
			bobSession = r.Session
		}
	}
	if err := mcpserver.RevokeKey(keys, "bob"); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := post(t, url, bob, b.ID(), list); code != http.StatusUnauthorized {
		t.Errorf("bob after revocation: %d; want 401", code)
	}
	deadline = time.Now().Add(10 * time.Second)
	for hasSession(t, e.inner, bobSession) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if bobSession == "" || hasSession(t, e.inner, bobSession) {
		t.Errorf("bob's sandbox session %q survives the revocation of his key", bobSession)
	}
	if !hasSession(t, e.inner, info.Session) {
		t.Errorf("alice's sandbox session %s went with bob's key", info.Session)
	}
	ok(t, a, "terminal", map[string]any{"command": "true"}, nil)
	if err := stop(); err != nil {
		t.Errorf("ListenAndServe: %v", err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
