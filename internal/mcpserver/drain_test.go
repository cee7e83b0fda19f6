package mcpserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
)

// Stopping the server (what SIGTERM does: the serve context ends) lets a running command
// finish within the drain timeout, refuses new work, removes the sessions and returns nil.
func TestDrainFinishesRunningCommand(t *testing.T) {
	e := newEnv(t, envOptions{drain: 20 * time.Second})
	base, stop := teamServer(t, e)
	cs, err := httpClient(t, base+mcpserver.HTTPPath, adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	for _, p := range []string{mcpserver.HealthPath, mcpserver.ReadyPath} {
		resp, err := http.Get(base + p)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", p, resp, err)
		}
		resp.Body.Close()
	}
	started := e.work + "/started"
	res := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, _ := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "terminal",
			Arguments: map[string]any{"command": "touch " + started + "; sleep 1; echo drained-ok"}})
		res <- r
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !exists(started) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stopped := make(chan error, 1)
	t0 := time.Now()
	go func() { stopped <- stop() }()
	// While draining: not ready, and no new connections.
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + mcpserver.ReadyPath)
		if err != nil {
			break // the listener is closed
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "shutting down") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := <-res; r == nil || r.IsError || !strings.Contains(text(r), "drained-ok") {
		t.Errorf("the running command did not finish during the drain: %v", r)
	}
	if err := <-stopped; err != nil {
		t.Errorf("ListenAndServe after the drain: %v; want nil (exit 0)", err)
	}
	if d := time.Since(t0); d > 15*time.Second {
		t.Errorf("the drain took %v", d)
	}
	if hasSession(t, e.inner, info.Session) {
		t.Errorf("session %s survives the drain", info.Session)
	}
	if _, err := http.Get(base + mcpserver.HealthPath); err == nil {
		t.Error("the server still accepts connections after the drain")
	}
}

// A command that outlives the drain timeout is cancelled, and the server still stops.
func TestDrainTimeoutCancels(t *testing.T) {
	e := newEnv(t, envOptions{drain: 300 * time.Millisecond})
	base, stop := teamServer(t, e)
	cs, err := httpClient(t, base+mcpserver.HTTPPath, adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	started := e.work + "/started"
	go cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "terminal",
		Arguments: map[string]any{"command": "touch " + started + "; sleep 60"}})
	deadline := time.Now().Add(10 * time.Second)
	for !exists(started) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	t0 := time.Now()
	if err := stop(); err != nil {
		t.Errorf("ListenAndServe: %v", err)
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("stopping with a 60s command took %v; want the drain timeout and the cancellation", d)
	}
	if hasSession(t, e.inner, info.Session) {
		t.Errorf("session %s survives the drain", info.Session)
	}
}

func TestCheckTransport(t *testing.T) {
	for _, c := range []struct {
		addr          string
		tls, insecure bool
		wantErr       bool
	}{
		{"127.0.0.1:8765", false, false, false},
		{"[::1]:8765", false, false, false},
		{"0.0.0.0:8765", false, false, true},
		{"10.1.2.3:8765", false, false, true},
		{"0.0.0.0:8765", true, false, false},
		{"0.0.0.0:8765", false, true, false},
	} {
		err := mcpserver.CheckTransport(c.addr, c.tls, c.insecure)
		if (err != nil) != c.wantErr {
			t.Errorf("CheckTransport(%s, tls %v, insecure %v) = %v; want error %v", c.addr, c.tls, c.insecure, err, c.wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), "clear text") || !strings.Contains(err.Error(), "--insecure-http")) {
			t.Errorf("the refusal does not say why and what to do: %v", err)
		}
	}
}
