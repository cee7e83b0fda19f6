package mcpserver_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// mcpSessions lists the sandbox sessions the server opened on the inner backend.
func (e *env) mcpSessions() []string {
	e.t.Helper()
	infos, err := e.inner.(sandbox.SessionManager).Sessions(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, in := range infos {
		if strings.HasPrefix(in.Name, mcpserver.SessionPrefix) {
			out = append(out, in.Name)
		}
	}
	return out
}

func TestMaxSessions(t *testing.T) {
	e := newEnv(t, envOptions{maxSessions: 2})
	first, endFirst := e.connect(nil, nil)
	second, _ := e.connect(nil, nil)
	third, _ := e.connect(nil, nil)
	ok(t, first, "terminal", map[string]any{"command": "echo one"}, nil)
	ok(t, second, "terminal", map[string]any{"command": "echo two"}, nil)
	msg := refused(t, third, "terminal", map[string]any{"command": "echo three"})
	if !strings.Contains(msg, "mcp.max_sessions") {
		t.Errorf("third session's call = %q; want an error naming mcp.max_sessions", msg)
	}
	if got := e.mcpSessions(); len(got) != 2 {
		t.Errorf("sandbox sessions = %v; want 2", got)
	}
	// When one ends, its place is free.
	endFirst()
	var out struct {
		Stdout string `json:"stdout"`
	}
	ok(t, third, "terminal", map[string]any{"command": "echo three"}, &out)
	if out.Stdout != "three\n" {
		t.Errorf("third session after one ended printed %q", out.Stdout)
	}
}

func TestIdleSessionIsCleanedUp(t *testing.T) {
	e := newEnv(t, envOptions{idle: time.Second})
	ts := httptest.NewServer(e.srv.Handler(""))
	t.Cleanup(ts.Close)
	cs, err := httpClient(t, ts.URL+mcpserver.HTTPPath, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ok(t, cs, "terminal", map[string]any{"command": "echo hi > note.txt"}, nil)
	if got := e.mcpSessions(); len(got) != 1 {
		t.Fatalf("sandbox sessions after a call = %v; want 1", got)
	}
	// The client goes quiet without ending its session: the server ends it, and removes its
	// sandbox session, once the idle timeout has passed.
	deadline := time.Now().Add(30 * time.Second)
	for len(e.mcpSessions()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox session %v still there 30s after a 1s idle timeout", e.mcpSessions())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
