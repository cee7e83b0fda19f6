package vercel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// How long the interactive server may take to become ready, and how many times a
// WebSocket open that fails is tried (the official CLI tried three times, 500 ms apart).
var (
	ptyReadyWait    = 30 * time.Second
	ptyDialAttempts = 3
	ptyDialPause    = 500 * time.Millisecond
)

// openPTY asks for the session's interactive terminal, waits until its server answers,
// connects with the token in the URL's query and sends the start frame. A token refused at
// the handshake (expired, used) is replaced by a new one once. No error carries the token.
func (b *Backend) openPTY(ctx context.Context, id string, start ptyStart) (*ptyConn, error) {
	var hc *http.Client
	if b.extra.HTTPClient != nil {
		hc = b.extra.HTTPClient
	}
	renewed := false
	for attempt := 1; ; attempt++ {
		wsURL, token, err := b.api.Interactive(ctx, id)
		if err != nil {
			return nil, b.apiErr("open terminal", id, err)
		}
		target, err := withToken(wsURL, token)
		if err != nil {
			return nil, b.apiErr("open terminal", id, err)
		}
		if err := waitReady(ctx, b.api.http, wsURL, ptyReadyWait); err != nil {
			return nil, &sandbox.Error{Backend: Name, Op: "open terminal", ID: id, Err: sandbox.WithKind(sandbox.ErrUnavailable, err)}
		}
		conn, resp, err := websocket.Dial(ctx, target, &websocket.DialOptions{HTTPClient: hc})
		if err == nil {
			conn.SetReadLimit(1 << 24)
			msg, _ := json.Marshal(start)
			if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
				conn.CloseNow()
				return nil, &sandbox.Error{Backend: Name, Op: "open terminal", ID: id, Err: scrub(err, token)}
			}
			return newPTYConn(conn), nil
		}
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		err = fmt.Errorf("connect to %s: %w", redactURL(wsURL), scrub(err, token))
		switch {
		case ctx.Err() != nil:
			return nil, &sandbox.Error{Backend: Name, Op: "open terminal", ID: id, Err: ctx.Err()}
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			if !renewed {
				renewed = true
				continue
			}
			return nil, &sandbox.Error{Backend: Name, Op: "open terminal", ID: id, Err: sandbox.WithHint(sandbox.ErrDenied,
				err, fmt.Sprintf("the terminal refused a fresh token (HTTP %d)", status))}
		case attempt >= ptyDialAttempts:
			return nil, &sandbox.Error{Backend: Name, Op: "open terminal", ID: id, Err: sandbox.WithKind(sandbox.ErrUnavailable, err)}
		}
		b.log.Debug("terminal did not open; trying again", "session_id", id, "attempt", attempt, "err", err)
		if serr := sandbox.Sleep(ctx, ptyDialPause); serr != nil {
			return nil, &sandbox.Error{Backend: Name, Op: "open terminal", ID: id, Err: serr}
		}
	}
}

// errNotReady is a terminal whose server never became ready: waitReady has waited its
// bound, so trying again at once would not help.
var errNotReady = errors.New("terminal not ready")

// withToken is the WebSocket URL with the token in its query, as interactive-shell.ts
// builds it.
func withToken(wsURL, token string) (string, error) {
	u, err := url.Parse(wsURL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return "", fmt.Errorf("the API returned %q as the terminal's URL: want a ws(s) URL", redactURL(wsURL))
	}
	q := u.Query()
	q.Set("token", token)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// waitReady polls https://{host}/health until the interactive server answers. Any answer
// below 500 means a server is listening (one without the route says 404); network errors
// and 5xx (a proxy in front of a server still starting) are tried again until wait is
// over.
func waitReady(ctx context.Context, hc *http.Client, wsURL string, wait time.Duration) error {
	u, err := url.Parse(wsURL)
	if err != nil {
		return err
	}
	health := url.URL{Scheme: "https", Host: u.Host, Path: "/health"}
	if u.Scheme == "ws" {
		health.Scheme = "http"
	}
	deadline := time.Now().Add(wait)
	pause := 50 * time.Millisecond
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, health.String(), nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<12))
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: the interactive server at %s did not answer after %s (GET /health: %v)", errNotReady, u.Host, wait, err)
		}
		if serr := sandbox.Sleep(ctx, pause); serr != nil {
			return serr
		}
		pause = min(pause*2, time.Second)
	}
}

// scrub removes the token from an error's text (net/http errors quote the URL whole);
// errors.Is still sees the context's errors.
func scrub(err error, token string) error {
	if err == nil || token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	msg := strings.ReplaceAll(err.Error(), token, "…")
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", msg, context.Canceled)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", msg, context.DeadlineExceeded)
	}
	return errors.New(msg)
}

func redactURL(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i] + "?…"
	}
	return s
}

// ptyConn is the terminal as a byte stream: binary frames are its bytes; a text frame is
// either the server's {"type":"exit","code":N} (the end of the stream) or, when it is not
// JSON, output (as interactive-shell.ts treats it).
type ptyConn struct {
	conn   *websocket.Conn
	life   context.Context // lives as long as the helper, beyond the opening call's context
	cancel context.CancelFunc

	rmu sync.Mutex
	cur io.Reader // guarded by rmu; the frame being read

	mu     sync.Mutex
	code   *int // guarded by mu
	closed sync.Once
}

func newPTYConn(conn *websocket.Conn) *ptyConn {
	life, cancel := context.WithCancel(context.Background())
	return &ptyConn{conn: conn, life: life, cancel: cancel}
}

func (p *ptyConn) Read(b []byte) (int, error) {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	for {
		if p.cur != nil {
			n, err := p.cur.Read(b)
			if err == io.EOF {
				p.cur, err = nil, nil
			}
			if n > 0 || err != nil {
				return n, err
			}
			continue
		}
		typ, r, err := p.conn.Reader(p.life)
		if err != nil {
			if websocket.CloseStatus(err) != -1 {
				return 0, io.EOF
			}
			return 0, err
		}
		if typ == websocket.MessageBinary {
			p.cur = r
			continue
		}
		msg, err := io.ReadAll(io.LimitReader(r, 1<<20))
		if err != nil {
			return 0, err
		}
		var c ptyControl
		if json.Unmarshal(msg, &c) != nil {
			p.cur = strings.NewReader(string(msg))
			continue
		}
		if c.Type == "exit" {
			p.mu.Lock()
			p.code = c.Code
			p.mu.Unlock()
			return 0, io.EOF
		}
	}
}

func (p *ptyConn) Write(b []byte) (int, error) {
	if err := p.conn.Write(p.life, websocket.MessageBinary, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// exitCode is the status the server reported, once the stream has ended.
func (p *ptyConn) exitCode() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.code == nil {
		return 0, false
	}
	return *p.code, true
}

func (p *ptyConn) Close() error {
	p.closed.Do(func() {
		p.conn.Close(websocket.StatusNormalClosure, "")
		p.cancel()
	})
	return nil
}
