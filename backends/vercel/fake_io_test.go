package vercel

// The fake's file routes (fs/mkdir, fs/read, fs/write) and its interactive PTY WebSocket.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/moby/moby/client"
)

type pathBody struct {
	Path string  `json:"path"`
	Cwd  *string `json:"cwd"`
}

func (p pathBody) abs() string {
	if path.IsAbs(p.Path) || p.Cwd == nil {
		return path.Clean(p.Path)
	}
	return path.Join(*p.Cwd, p.Path)
}

func (f *fake) mkdir(w http.ResponseWriter, r *http.Request) {
	var b pathBody
	_, sb := f.session(w, r, true)
	if sb == nil || !decode(w, r, &b) {
		return
	}
	p := b.abs()
	if _, err := f.cli.ContainerStatPath(r.Context(), sb.containerID, client.ContainerStatPathOptions{Path: p}); err == nil {
		apiError(w, http.StatusConflict, "file_exists", p+" exists")
		return
	}
	if _, err := f.cli.ContainerStatPath(r.Context(), sb.containerID, client.ContainerStatPathOptions{Path: path.Dir(p)}); err != nil {
		apiError(w, http.StatusNotFound, "not_found", path.Dir(p)+" does not exist")
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

func (f *fake) readFile(w http.ResponseWriter, r *http.Request) {
	var b pathBody
	_, sb := f.session(w, r, true)
	if sb == nil || !decode(w, r, &b) {
		return
	}
	res, err := f.cli.CopyFromContainer(r.Context(), sb.containerID, client.CopyFromContainerOptions{SourcePath: b.abs()})
	if err != nil {
		apiError(w, http.StatusNotFound, "not_found", "file not found")
		return
	}
	rc := res.Content
	defer rc.Close()
	if res.Stat.Mode.IsDir() {
		apiError(w, http.StatusBadRequest, "is_directory", "is a directory")
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
	if !path.IsAbs(dir) {
		apiError(w, http.StatusBadRequest, "bad_request", "x-cwd must be an absolute path")
		return
	}
	gz, err := gzip.NewReader(r.Body)
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "body is not gzip: "+err.Error())
		return
	}
	if _, err := f.cli.ContainerStatPath(r.Context(), sb.containerID, client.ContainerStatPathOptions{Path: dir}); err != nil {
		apiError(w, http.StatusNotFound, "not_found", dir+" does not exist")
		return
	}
	if _, err := f.cli.CopyToContainer(r.Context(), sb.containerID, client.CopyToContainerOptions{DestinationPath: dir, Content: gz}); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	reply(w, map[string]any{})
}

// The PTY WebSocket ---------------------------------------------------------------------

func (f *fake) interactive(w http.ResponseWriter, r *http.Request) {
	var b struct{}
	s, _ := f.session(w, r, true)
	if s == nil || !decode(w, r, &b) {
		return
	}
	tok := randHex(16)
	f.mu.Lock()
	f.ptyTokens[tok] = s.id
	f.mu.Unlock()
	reply(w, map[string]any{"url": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/pty/" + s.id, "token": tok})
}

func (f *fake) pty(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 24)
	ctx := context.WithoutCancel(r.Context())
	typ, msg, err := conn.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		conn.Close(websocket.StatusPolicyViolation, "want a start frame")
		return
	}
	var start struct {
		Type    string            `json:"type"`
		Token   string            `json:"token"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Cwd     string            `json:"cwd"`
		Env     map[string]string `json:"env"`
		Cols    uint              `json:"cols"`
		Rows    uint              `json:"rows"`
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&start); err != nil || start.Type != "start" {
		conn.Close(websocket.StatusPolicyViolation, "bad start frame")
		return
	}
	f.mu.Lock()
	sid, ok := f.ptyTokens[start.Token]
	delete(f.ptyTokens, start.Token)
	s := f.sessions[sid]
	var sb *fSandbox
	if s != nil {
		sb = f.sandboxes[s.sandbox]
	}
	f.mu.Unlock()
	if !ok || sid != r.PathValue("id") || sb == nil {
		conn.Close(websocket.StatusPolicyViolation, "bad token")
		return
	}
	env := []string{"TERM=xterm-256color"}
	for k, v := range start.Env {
		env = append(env, k+"="+v)
	}
	ex, err := f.cli.ExecCreate(ctx, sb.containerID, client.ExecCreateOptions{Cmd: append([]string{start.Command}, start.Args...),
		Env: env, WorkingDir: start.Cwd, TTY: true, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		ConsoleSize: client.ConsoleSize{Height: start.Rows, Width: start.Cols}})
	if err != nil {
		conn.Close(websocket.StatusInternalError, err.Error())
		return
	}
	hr, err := f.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: true})
	if err != nil {
		conn.Close(websocket.StatusInternalError, err.Error())
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
			var rs struct {
				Type       string `json:"type"`
				Cols, Rows uint
			}
			if json.Unmarshal(msg, &rs) == nil && rs.Type == "resize" {
				f.cli.ExecResize(ctx, ex.ID, client.ExecResizeOptions{Height: rs.Rows, Width: rs.Cols})
			}
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
	exit, _ := json.Marshal(map[string]any{"type": "exit", "exitCode": code})
	conn.Write(ctx, websocket.MessageText, exit)
	conn.Close(websocket.StatusNormalClosure, "exited")
}
