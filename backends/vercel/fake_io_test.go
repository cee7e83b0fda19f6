//go:build unix

package vercel

// The fake's file routes (fs/mkdir, fs/read, fs/write) and its interactive PTY WebSocket.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/moby/moby/client"
)

// pathBody is fs/mkdir's and fs/read's body (api-client.ts mkDir, readFile: path, cwd).
type pathBody struct {
	Path string  `json:"path"`
	Cwd  *string `json:"cwd"`
}

// abs resolves the path as the service does: relative to cwd, else to the session's
// working directory (the official mock's resolvePath(cwd ?? session.cwd, path)).
func (p pathBody) abs() string {
	if path.IsAbs(p.Path) {
		return path.Clean(p.Path)
	}
	if p.Cwd == nil {
		return path.Join(sessionCwd, p.Path)
	}
	return path.Join(*p.Cwd, p.Path)
}

// sessionCwd is every fake session's working directory.
const sessionCwd = "/vercel/sandbox"

// mkdir makes one directory, not its parents: the official mock notes the real route is
// not recursive, and answers 400 "mkdir failed: …" when the directory exists or its parent
// does not.
func (f *fake) mkdir(w http.ResponseWriter, r *http.Request) {
	var b pathBody
	_, sb := f.session(w, r, true)
	if sb == nil || !decode(w, r, &b) {
		return
	}
	if b.Path == "" {
		apiError(w, http.StatusBadRequest, "bad_request", "path is required")
		return
	}
	p := b.abs()
	if _, err := f.cli.ContainerStatPath(r.Context(), sb.containerID, client.ContainerStatPathOptions{Path: p}); err == nil {
		apiError(w, http.StatusBadRequest, "bad_request", "mkdir failed: Error: EEXIST: file already exists, mkdir '"+p+"'")
		return
	}
	if _, err := f.cli.ContainerStatPath(r.Context(), sb.containerID, client.ContainerStatPathOptions{Path: path.Dir(p)}); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "mkdir failed: Error: ENOENT: no such file or directory, mkdir '"+p+"'")
		return
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: path.Base(p) + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Now()})
	tw.Close()
	if _, err := f.cli.CopyToContainer(r.Context(), sb.containerID, client.CopyToContainerOptions{DestinationPath: path.Dir(p), Content: &buf}); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	reply(w, map[string]any{})
}

// readFile answers the file's bytes as application/octet-stream, or a 404 with an empty
// body (the official mock; api-client.ts readFile turns that 404 into null).
func (f *fake) readFile(w http.ResponseWriter, r *http.Request) {
	var b pathBody
	_, sb := f.session(w, r, true)
	if sb == nil || !decode(w, r, &b) {
		return
	}
	res, err := f.cli.CopyFromContainer(r.Context(), sb.containerID, client.CopyFromContainerOptions{SourcePath: b.abs()})
	if err != nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	rc := res.Content
	defer rc.Close()
	if res.Stat.Mode.IsDir() {
		apiError(w, http.StatusBadRequest, "bad_request", "read failed: EISDIR: illegal operation on a directory")
		return
	}
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	io.Copy(w, tr)
}

// writeFiles extracts a gzipped tar (api-client.ts getFileWriter: content-type
// application/gzip, x-cwd the extraction directory, "/" for the SDK's writeFiles) and, as
// the official mock does, makes each entry's missing directories.
func (f *fake) writeFiles(w http.ResponseWriter, r *http.Request) {
	_, sb := f.session(w, r, true)
	if sb == nil {
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/gzip" {
		apiError(w, http.StatusBadRequest, "bad_request", "content-type must be application/gzip")
		return
	}
	dir := r.Header.Get("X-Cwd")
	if dir == "" {
		dir = "/"
	}
	if !path.IsAbs(dir) {
		apiError(w, http.StatusBadRequest, "bad_request", "x-cwd must be an absolute path")
		return
	}
	gz, err := gzip.NewReader(r.Body)
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "body is not gzip: "+err.Error())
		return
	}
	// Re-root every entry at "/" (the engine makes the missing parents of what it extracts).
	var out bytes.Buffer
	tr, tw := tar.NewReader(gz), tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			apiError(w, http.StatusBadRequest, "bad_request", "body is not a tar: "+err.Error())
			return
		}
		if h.Typeflag != tar.TypeReg || path.IsAbs(h.Name) {
			apiError(w, http.StatusBadRequest, "bad_request", "unexpected tar entry "+h.Name)
			return
		}
		h.Name = strings.TrimPrefix(path.Join(dir, h.Name), "/")
		if err := tw.WriteHeader(h); err != nil {
			apiError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		if _, err := io.Copy(tw, tr); err != nil {
			apiError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
	}
	tw.Close()
	if _, err := f.cli.CopyToContainer(r.Context(), sb.containerID, client.CopyToContainerOptions{DestinationPath: "/", Content: &out}); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	reply(w, map[string]any{})
}

// The interactive terminal ----------------------------------------------------------------
//
// Written from the official `sandbox` CLI (shared/specs/vercel-sandbox/interactive-shell.ts),
// not from this project's client: POST …/interactive returns {url, token}; the client
// connects to `${url}?token=${encodeURIComponent(token)}` (no Authorization header, no
// token in any frame), sends one text frame {type:"start", command, args, env: ["K=V", …],
// cwd, cols, rows}, then binary frames of input and {type:"resize", cols, rows} text frames;
// the server sends output in binary frames and ends with the text frame {type:"exit", code}.

// fakePTY holds the terminal's tokens and the tests' knobs.
type fakePTY struct {
	mu     sync.Mutex
	tokens map[string]ptyToken
	// tokenTTL is how long a token is good for (0 = a minute).
	tokenTTL time.Duration
	// notReady is how many /health polls answer 503 before the server is ready.
	notReady int
	// drop is how many terminal connections are accepted and then dropped at once.
	drop int
	// hangup is how many terminal requests are hung up on before the handshake's answer.
	hangup int
	// Counts for tests.
	healthPolls, opens, resizes int
	refused                     []string // why connections were refused
	issued                      []string // every token handed out
}

type ptyToken struct {
	session string
	expires time.Time
}

func (p *fakePTY) refuse(why string) {
	p.mu.Lock()
	p.refused = append(p.refused, why)
	p.mu.Unlock()
}

func (f *fake) interactive(w http.ResponseWriter, r *http.Request) {
	var b struct{}
	s, _ := f.session(w, r, true)
	if s == nil || !decode(w, r, &b) {
		return
	}
	tok := "vcpty_" + randHex(16)
	p := &f.term
	p.mu.Lock()
	ttl := p.tokenTTL
	if ttl == 0 {
		ttl = time.Minute
	}
	if p.tokens == nil {
		p.tokens = map[string]ptyToken{}
	}
	p.tokens[tok] = ptyToken{session: s.id, expires: time.Now().Add(ttl)}
	p.issued = append(p.issued, tok)
	p.mu.Unlock()
	reply(w, map[string]any{"url": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/pty/" + s.id, "token": tok})
}

// health is the interactive server's readiness route.
func (f *fake) health(w http.ResponseWriter, r *http.Request) {
	p := &f.term
	p.mu.Lock()
	p.healthPolls++
	ready := p.healthPolls > p.notReady
	p.mu.Unlock()
	if !ready {
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	reply(w, map[string]any{"status": "ok"})
}

// ptyStartFrame is the start frame exactly as interactive-shell.ts builds it; cols and rows
// are absent when its stdout is not a terminal.
type ptyStartFrame struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Env     []string `json:"env"`
	Cwd     string   `json:"cwd"`
	Cols    *uint    `json:"cols"`
	Rows    *uint    `json:"rows"`
}

// ptyResizeFrame is interactive-shell.ts's resize frame.
type ptyResizeFrame struct {
	Type string `json:"type"`
	Cols uint   `json:"cols"`
	Rows uint   `json:"rows"`
}

// strictJSON decodes a frame, refusing unknown fields, wrong types and trailing data.
func strictJSON(msg []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

func (f *fake) pty(w http.ResponseWriter, r *http.Request) {
	p := &f.term
	p.mu.Lock()
	hangup := p.hangup > 0
	if hangup {
		p.hangup--
	}
	p.mu.Unlock()
	if hangup {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
		return
	}
	tok := r.URL.Query().Get("token")
	p.mu.Lock()
	t, ok := p.tokens[tok]
	delete(p.tokens, tok) // a token opens one terminal
	p.mu.Unlock()
	switch {
	case tok == "":
		p.refuse("no token in the query")
		http.Error(w, "missing token", http.StatusUnauthorized)
		return
	case !ok || t.session != r.PathValue("id"):
		p.refuse("unknown token")
		http.Error(w, "invalid token", http.StatusUnauthorized)
		return
	case time.Now().After(t.expires):
		p.refuse("expired token")
		http.Error(w, "token expired", http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	s := f.sessions[t.session]
	var sb *fSandbox
	if s != nil && s.status == "running" {
		sb = f.sandboxes[s.sandbox]
	}
	f.mu.Unlock()
	if sb == nil {
		http.Error(w, "session is not running", http.StatusGone)
		return
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	p.mu.Lock()
	p.opens++
	drop := p.drop > 0
	if drop {
		p.drop--
	}
	p.mu.Unlock()
	if drop {
		return // the connection breaks: no close frame, no exit frame
	}
	conn.SetReadLimit(1 << 24)
	ctx := context.WithoutCancel(r.Context())
	typ, msg, err := conn.Read(ctx)
	if err != nil {
		return
	}
	var start ptyStartFrame
	if typ != websocket.MessageText {
		p.refuse("the first frame is binary")
		conn.Close(websocket.StatusPolicyViolation, "expected a start frame")
		return
	}
	if err := strictJSON(msg, &start); err != nil || start.Type != "start" || start.Command == "" {
		p.refuse(fmt.Sprintf("bad start frame: %v", err))
		conn.Close(websocket.StatusPolicyViolation, "invalid start frame")
		return
	}
	for _, kv := range start.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			p.refuse("bad env entry " + kv)
			conn.Close(websocket.StatusPolicyViolation, "invalid env entry")
			return
		}
	}
	cols, rows := uint(80), uint(24)
	if start.Cols != nil && start.Rows != nil {
		cols, rows = *start.Cols, *start.Rows
	}
	cwd := start.Cwd
	if cwd == "" {
		cwd = sessionCwd
	}
	ex, err := f.cli.ExecCreate(ctx, sb.containerID, client.ExecCreateOptions{Cmd: append([]string{start.Command}, start.Args...),
		Env: start.Env, WorkingDir: cwd, TTY: true, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		ConsoleSize: client.ConsoleSize{Height: rows, Width: cols}})
	if err != nil {
		conn.Close(websocket.StatusInternalError, "exec failed")
		return
	}
	hr, err := f.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: true})
	if err != nil {
		conn.Close(websocket.StatusInternalError, "attach failed")
		return
	}
	defer hr.Close()
	go func() {
		for {
			typ, msg, err := conn.Read(ctx)
			if err != nil {
				hr.Close()
				return
			}
			if typ == websocket.MessageBinary {
				if _, err := hr.Conn.Write(msg); err != nil {
					return
				}
				continue
			}
			var rs ptyResizeFrame
			if err := strictJSON(msg, &rs); err != nil || rs.Type != "resize" {
				p.refuse(fmt.Sprintf("bad control frame %q", msg))
				conn.Close(websocket.StatusPolicyViolation, "invalid control frame")
				hr.Close()
				return
			}
			p.mu.Lock()
			p.resizes++
			p.mu.Unlock()
			f.cli.ExecResize(ctx, ex.ID, client.ExecResizeOptions{Height: rs.Rows, Width: rs.Cols})
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := hr.Reader.Read(buf)
		if n > 0 {
			if werr := conn.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			break
		}
	}
	code := -1
	if info, err := f.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{}); err == nil {
		code = info.ExitCode
	}
	exit, _ := json.Marshal(map[string]any{"type": "exit", "code": code})
	conn.Write(ctx, websocket.MessageText, exit)
	conn.Close(websocket.StatusNormalClosure, "")
}
