//go:build unix

package vercel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// officialStart is the start frame as interactive-shell.ts builds it: TERM and PS1 first,
// the caller's variables after, as "KEY=VALUE" strings.
func officialStart(cmd string, args ...string) map[string]any {
	return map[string]any{"type": "start", "command": cmd, "args": args,
		"env": []string{"TERM=xterm-256color", "PS1=▲ ", "FOO=bar baz"}, "cwd": "/vercel/sandbox", "cols": 120, "rows": 40}
}

// runningVM starts a session through the backend and returns its VM session id.
func runningVM(t *testing.T, s *setup, name string) string {
	t.Helper()
	ctx := ctxT(t, 3*time.Minute)
	sess, err := s.backend(t, nil).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	run(t, sess, "true")
	t.Cleanup(func() { sess.Close() })
	return s.f.current(name)
}

// openOfficial asks for a terminal and connects to it the way interactive-shell.ts does.
func openOfficial(t *testing.T, ctx context.Context, b *Backend, vm string) (*websocket.Conn, string) {
	t.Helper()
	wsURL, token, err := b.api.Interactive(ctx, vm)
	if err != nil {
		t.Fatalf("Interactive() = %v", err)
	}
	conn, resp, err := websocket.Dial(ctx, wsURL+"?token="+url.QueryEscape(token), nil)
	if err != nil {
		t.Fatalf("dial as the official CLI = %v (%v)", err, resp)
	}
	return conn, token
}

// TestFakeTerminalFollowsOfficialClient drives the fake's terminal exactly as Vercel's
// `sandbox` CLI does: the program's output in binary frames, input in binary frames, a
// resize frame, and the exit status in the final {"type":"exit","code":N} frame.
func TestFakeTerminalFollowsOfficialClient(t *testing.T) {
	s := newSetup(t)
	ctx := ctxT(t, 3*time.Minute)
	b := s.backend(t, nil)
	vm := runningVM(t, s, "official")
	conn, _ := openOfficial(t, ctx, b, vm)
	defer conn.CloseNow()
	start, _ := json.Marshal(officialStart("/bin/sh", "-c", `stty -echo; read x; echo "got $x $FOO"; stty size; exit 7`))
	if err := conn.Write(ctx, websocket.MessageText, start); err != nil {
		t.Fatal(err)
	}
	resize, _ := json.Marshal(map[string]any{"type": "resize", "cols": 90, "rows": 30})
	if err := conn.Write(ctx, websocket.MessageText, resize); err != nil {
		t.Fatal(err)
	}
	if err := conn.Write(ctx, websocket.MessageBinary, []byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code := -100
	for code == -100 {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read after %q: %v; want an exit frame", out.String(), err)
		}
		if typ == websocket.MessageBinary {
			out.Write(msg)
			continue
		}
		var exit struct {
			Type string `json:"type"`
			Code *int   `json:"code"`
		}
		if err := json.Unmarshal(msg, &exit); err != nil || exit.Type != "exit" || exit.Code == nil {
			t.Fatalf("text frame %q; want {type: exit, code: N}", msg)
		}
		code = *exit.Code
	}
	if code != 7 || !strings.Contains(out.String(), "got hi bar baz") || !strings.Contains(out.String(), "30 90") {
		t.Errorf("terminal = %d %q; want 7, the input and FOO echoed, size 30 90 after the resize", code, out.String())
	}
}

// TestFakeTerminalRefusesWhatVercelRefuses: each way a client could hold the protocol wrong
// is refused, so a backend that does it cannot pass the suite.
func TestFakeTerminalRefusesWhatVercelRefuses(t *testing.T) {
	s := newSetup(t)
	ctx := ctxT(t, 3*time.Minute)
	b := s.backend(t, nil)
	vm := runningVM(t, s, "refuse")
	handshake := func(t *testing.T, target string, h http.Header) int {
		t.Helper()
		conn, resp, err := websocket.Dial(ctx, target, &websocket.DialOptions{HTTPHeader: h})
		if err == nil {
			conn.CloseNow()
			return http.StatusSwitchingProtocols
		}
		if resp == nil {
			t.Fatalf("dial %s: %v", redactURL(target), err)
		}
		return resp.StatusCode
	}
	t.Run("token in a header, not the query", func(t *testing.T) {
		wsURL, token, _ := b.api.Interactive(ctx, vm)
		if got := handshake(t, wsURL, http.Header{"Authorization": {"Bearer " + token}}); got != http.StatusUnauthorized {
			t.Errorf("handshake = %d; want 401", got)
		}
	})
	t.Run("token used twice", func(t *testing.T) {
		wsURL, token, _ := b.api.Interactive(ctx, vm)
		target := wsURL + "?token=" + url.QueryEscape(token)
		if got := handshake(t, target, nil); got != http.StatusSwitchingProtocols {
			t.Fatalf("first handshake = %d; want 101", got)
		}
		if got := handshake(t, target, nil); got != http.StatusUnauthorized {
			t.Errorf("second handshake = %d; want 401", got)
		}
	})
	t.Run("expired token", func(t *testing.T) {
		s.f.term.mu.Lock()
		s.f.term.tokenTTL = time.Nanosecond
		s.f.term.mu.Unlock()
		defer func() {
			s.f.term.mu.Lock()
			s.f.term.tokenTTL = 0
			s.f.term.mu.Unlock()
		}()
		wsURL, token, _ := b.api.Interactive(ctx, vm)
		if got := handshake(t, wsURL+"?token="+url.QueryEscape(token), nil); got != http.StatusUnauthorized {
			t.Errorf("handshake = %d; want 401", got)
		}
	})
	frames := []struct {
		name  string
		frame func(token string) any
	}{
		{"token in the start frame", func(tok string) any {
			m := officialStart("/bin/true")
			m["token"] = tok
			return m
		}},
		{"env as an object", func(string) any {
			m := officialStart("/bin/true")
			m["env"] = map[string]string{"FOO": "bar"}
			return m
		}},
		{"env entry without =", func(string) any {
			m := officialStart("/bin/true")
			m["env"] = []string{"FOO"}
			return m
		}},
		{"no command", func(string) any {
			m := officialStart("")
			return m
		}},
		{"exitCode-era frame type", func(string) any { return map[string]any{"type": "begin", "command": "/bin/true"} }},
	}
	for _, tc := range frames {
		t.Run(tc.name, func(t *testing.T) {
			conn, token := openOfficial(t, ctx, b, vm)
			defer conn.CloseNow()
			msg, _ := json.Marshal(tc.frame(token))
			conn.Write(ctx, websocket.MessageText, msg)
			for {
				typ, msg, err := conn.Read(ctx)
				if err != nil {
					if st := websocket.CloseStatus(err); st != websocket.StatusPolicyViolation {
						t.Errorf("connection ended with %v (status %d); want a 1008 close", err, st)
					}
					return
				}
				if typ == websocket.MessageText && strings.Contains(string(msg), `"exit"`) {
					t.Fatalf("the fake ran the program (%s); want the frame refused", msg)
				}
			}
		})
	}
	t.Run("unknown control frame", func(t *testing.T) {
		conn, _ := openOfficial(t, ctx, b, vm)
		defer conn.CloseNow()
		start, _ := json.Marshal(officialStart("/bin/sh", "-c", "read x"))
		conn.Write(ctx, websocket.MessageText, start)
		conn.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","columns":80,"lines":24}`))
		for {
			_, _, err := conn.Read(ctx)
			if err != nil {
				if st := websocket.CloseStatus(err); st != websocket.StatusPolicyViolation {
					t.Errorf("connection ended with %v; want a 1008 close", err)
				}
				return
			}
		}
	})
}

// TestTerminalWaitsForHealth: the backend polls /health until the interactive server is
// ready, and gives up after ptyReadyWait with a clear error.
func TestTerminalWaitsForHealth(t *testing.T) {
	s := newSetup(t)
	ctx := ctxT(t, 3*time.Minute)
	s.f.term.mu.Lock()
	s.f.term.notReady = 4
	s.f.term.mu.Unlock()
	sess, err := s.backend(t, nil).Open(ctx, "health")
	if err != nil {
		t.Fatal(err)
	}
	if res := run(t, sess, "echo up"); res.Stdout != "up\n" {
		t.Errorf("exec = %q; want up", res.Stdout)
	}
	sess.Close()
	s.f.term.mu.Lock()
	polls, opens := s.f.term.healthPolls, s.f.term.opens
	s.f.term.mu.Unlock()
	if polls < 5 || opens < 1 {
		t.Errorf("health polls %d, terminal opens %d; want ≥ 5 polls (4 not ready) before the first open", polls, opens)
	}

	old := ptyReadyWait
	ptyReadyWait = 300 * time.Millisecond
	t.Cleanup(func() { ptyReadyWait = old })
	s.f.term.mu.Lock()
	s.f.term.notReady = 1 << 30
	s.f.term.mu.Unlock()
	sess2, _ := s.backend(t, nil).Open(ctx, "health")
	_, err = sess2.Exec(ctx, sandbox.Command{Argv: []string{"true"}})
	sess2.Close()
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("exec with the terminal never ready = %v; want ErrUnavailable saying it was not ready", err)
	}
}

// TestTerminalTokenNeverLeaks: when opening the terminal fails (hung up before the
// handshake, then refused tokens), neither the error nor the debug log holds a token.
func TestTerminalTokenNeverLeaks(t *testing.T) {
	s := newSetup(t)
	ctx := ctxT(t, 3*time.Minute)
	var logs bytes.Buffer
	cfg := s.config(nil)
	opts := cfg.BackendOptions(sandbox.FactoryOptions{StateDir: s.state, Environ: []string{"PATH=/usr/bin:/bin"},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	b, err := NewWith(cfg.Vercel, opts, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	oldWait := helperWait
	helperWait = time.Second
	t.Cleanup(func() { helperWait = oldWait })
	s.f.term.mu.Lock()
	s.f.term.hangup = 1 << 30
	s.f.term.mu.Unlock()
	sess, _ := b.Open(ctx, "leak")
	_, hangErr := sess.Exec(ctx, sandbox.Command{Argv: []string{"true"}})
	sess.Close()
	s.f.term.mu.Lock()
	s.f.term.hangup = 0
	s.f.term.tokenTTL = time.Nanosecond
	s.f.term.mu.Unlock()
	sess2, _ := b.Open(ctx, "leak")
	_, refusedErr := sess2.Exec(ctx, sandbox.Command{Argv: []string{"true"}})
	sess2.Close()
	if !errors.Is(refusedErr, sandbox.ErrDenied) {
		t.Errorf("exec with every token refused = %v; want ErrDenied", refusedErr)
	}
	s.f.term.mu.Lock()
	issued := append([]string(nil), s.f.term.issued...)
	s.f.term.mu.Unlock()
	if hangErr == nil || len(issued) < 4 {
		t.Fatalf("hung-up exec = %v with %d tokens issued; want an error after several tries", hangErr, len(issued))
	}
	for _, tok := range issued {
		for what, text := range map[string]string{"hung-up error": hangErr.Error(), "refused error": refusedErr.Error(), "debug log": logs.String()} {
			if strings.Contains(text, tok) {
				t.Errorf("the %s holds a terminal token: %s", what, text)
			}
		}
	}
}

// TestStartIsIdempotent: a start that an earlier attempt left halfway carries on — the
// helper's directory already there, the helper gone or half written, the terminal
// dropped right after the upload — and a helper already there is not uploaded again.
func TestStartIsIdempotent(t *testing.T) {
	s := newSetup(t)
	ctx := ctxT(t, 5*time.Minute)
	writes := func() int { return s.f.count(func(r string) bool { return strings.HasSuffix(r, "/fs/write") }) }
	mkdirs := func() int { return s.f.count(func(r string) bool { return strings.HasSuffix(r, "/fs/mkdir") }) }
	exec := func(t *testing.T, script string) string {
		t.Helper()
		sess, err := s.backend(t, nil).Open(ctx, "idem")
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		return run(t, sess, script).Stdout
	}

	// The terminal drops right after a fresh sandbox's upload: the start carries on.
	s.f.term.mu.Lock()
	s.f.term.drop = 1
	s.f.term.mu.Unlock()
	if out := exec(t, "echo first"); out != "first\n" {
		t.Fatalf("first exec after a dropped terminal = %q", out)
	}
	if w := writes(); w != 1 {
		t.Errorf("fs/write calls after the first start = %d; want 1 (one upload, the drop does not upload again)", w)
	}
	// A later process finds the helper there: no upload.
	exec(t, "true")
	if w := writes(); w != 1 {
		t.Errorf("fs/write calls after a second process = %d; want still 1", w)
	}
	// The helper gone, its directory still there (a sandbox an earlier attempt left).
	exec(t, "rm -f /vercel/sandbox/.hermes/sandbox-agent-*; ls -d /vercel/sandbox/.hermes")
	if out := exec(t, "echo again"); out != "again\n" {
		t.Errorf("exec with the helper gone = %q", out)
	}
	// Half written (an upload cut off).
	exec(t, `for f in /vercel/sandbox/.hermes/sandbox-agent-*; do head -c 4096 "$f" > "$f.t"; chmod +x "$f.t"; mv "$f.t" "$f"; done`)
	if out := exec(t, "echo whole"); out != "whole\n" {
		t.Errorf("exec with the helper half written = %q", out)
	}
	if w := writes(); w != 3 {
		t.Errorf("fs/write calls = %d; want 3 (the first upload and one for each broken helper)", w)
	}
	if m := mkdirs(); m != 0 {
		t.Errorf("fs/mkdir calls = %d; want 0 (fs/write makes the directories)", m)
	}
}
