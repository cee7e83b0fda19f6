package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
)

// A malformed line on stdio gets a JSON-RPC error and the server keeps serving the session.
func TestStdioMalformedLines(t *testing.T) {
	e := newEnv(t, envOptions{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- e.srv.Serve(context.Background(), &mcpserver.LineTransport{Reader: inR, Writer: outW})
		outW.Close()
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatalf("write %q: %v", s, err)
		}
	}
	next := func() map[string]any {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the server closed stdout")
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("not JSON: %q", l)
			}
			return m
		case <-time.After(20 * time.Second):
			t.Fatal("no answer")
		}
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := next(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, bad := range []struct {
		line string
		code float64
	}{
		{`{not json`, -32700},
		{"{\"jsonrpc\":\"2.0\",\x00\"id\":5}", -32700},
		{`{"jsonrpc":"1.0","id":7,"method":"tools/list"}`, -32600},
	} {
		send(bad.line)
		m := next()
		er, _ := m["error"].(map[string]any)
		if er == nil || er["code"] != bad.code {
			t.Errorf("%q: answer %v; want error %v", bad.line, m, bad.code)
		}
	}
	send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"echo still-serving"}}}`)
	m := next()
	if b, _ := json.Marshal(m); !strings.Contains(string(b), "still-serving") {
		t.Errorf("after the malformed lines: %s", b)
	}
	inW.Close()
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return at EOF")
	}
}
