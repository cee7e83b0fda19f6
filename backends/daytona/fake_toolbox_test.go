package daytona

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/moby/moby/client"
)

// toolbox ----------------------------------------------------------------------------------

func (f *fakeDaytona) toolbox(w http.ResponseWriter, r *http.Request, op, id string, params map[string]string, body []byte) {
	f.mu.Lock()
	b := f.boxes[id]
	if b == nil {
		f.mu.Unlock()
		// The proxy asks the API whether the key may reach the sandbox: for one that does not
		// exist it may not (proxy.Authenticate).
		proxyError(w, r, http.StatusUnauthorized, "UNAUTHORIZED", "authentication failed: Bearer token is invalid")
		return
	}
	if b.state != "started" {
		f.mu.Unlock()
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": "sandbox is " + b.state})
		return
	}
	f.mu.Unlock()
	ctx := r.Context()
	switch op {
	case "ExecuteCommand":
		// The daemon feeds the command to a shell (process.ExecuteCommand), which expands
		// and splits it as any shell would; a timeout kills it and answers 408.
		var req executeRequest
		json.Unmarshal(body, &req)
		if strings.TrimSpace(req.Command) == "" {
			daemonError(w, r, http.StatusBadRequest, "command cannot be empty or whitespace-only")
			return
		}
		rctx := ctx
		if req.Timeout > 0 {
			var cancel context.CancelFunc
			rctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Second)
			defer cancel()
		}
		out, code, err := f.run(rctx, b, fakeUser, req.Cwd, nil, []string{"sh", "-c", req.Command})
		if errors.Is(err, context.DeadlineExceeded) {
			daemonError(w, r, http.StatusRequestTimeout, "command execution timeout")
			return
		}
		if err != nil {
			writeJSON(w, http.StatusOK, executeResponse{ExitCode: -1, Result: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, executeResponse{ExitCode: code, Result: string(out)})
	case "UploadFile":
		data, err := formFile(r)
		if err != nil {
			daemonAbort(w, http.StatusBadRequest)
			return
		}
		if err := f.upload(ctx, b, r.URL.Query().Get("path"), data); err != nil {
			daemonAbort(w, http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	case "CreatePtySession":
		var req ptyCreateRequest
		json.Unmarshal(body, &req)
		f.mu.Lock()
		defer f.mu.Unlock()
		if req.ID == "" {
			ginError(w, http.StatusBadRequest, "session ID is required")
			return
		}
		if b.ptys[req.ID] != nil {
			ginError(w, http.StatusConflict, fmt.Sprintf("PTY session with ID '%s' already exists", req.ID))
			return
		}
		b.ptys[req.ID] = &fakePty{cols: req.Cols, rows: req.Rows, cwd: req.Cwd}
		writeJSON(w, http.StatusCreated, ptyCreateResponse{SessionID: req.ID})
	case "ConnectPtySession":
		f.connectPty(w, r, b, params["sessionId"])
	case "DeletePtySession":
		f.mu.Lock()
		p := b.ptys[params["sessionId"]]
		delete(b.ptys, params["sessionId"])
		f.mu.Unlock()
		if p == nil {
			ginError(w, http.StatusNotFound, "PTY session not found")
			return
		}
		if p.close != nil {
			p.close()
		}
		writeJSON(w, http.StatusOK, map[string]any{"message": "PTY session deleted"})
	case "CreateSession", "SessionExecuteCommand", "GetSessionCommand", "GetSessionCommandLogs", "DeleteSession":
		f.processSession(w, r, op, b, params, body)
	case "DownloadFile", "ListFiles":
		f.files(w, r, op, b)
	default:
		f.t.Errorf("fake Daytona: toolbox %s is not served", op)
		ginError(w, http.StatusNotImplemented, op+" not served by the fake")
	}
}

func formFile(r *http.Request) ([]byte, error) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err != nil {
			return nil, fmt.Errorf("no file part: %v", err)
		}
		if p.FormName() == "file" {
			return io.ReadAll(p)
		}
	}
}

// upload writes data to p in b's container, making its directory, owned by the user.
func (f *fakeDaytona) upload(ctx context.Context, b *fakeBox, p string, data []byte) error {
	if !path.IsAbs(p) {
		p = path.Join(fakeHome, p)
	}
	dir := path.Dir(p)
	if _, code, err := f.run(ctx, b, fakeUser, "", nil, []string{"mkdir", "-p", dir}); err != nil || code != 0 {
		return fmt.Errorf("mkdir %s: exit %d %v", dir, code, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: path.Base(p), Mode: 0o644, Size: int64(len(data)), Uid: 1000, Gid: 1000, ModTime: time.Now()})
	tw.Write(data)
	tw.Close()
	_, err := f.cli.CopyToContainer(ctx, b.ctr, client.CopyToContainerOptions{DestinationPath: dir, Content: &buf})
	return err
}

// connectPty bridges a WebSocket to a shell on a real pseudo-terminal in the container
// (a docker exec with a TTY), as the daemon's ConnectPTYSession does: the upgrade comes first
// (any origin; an SDK-version subprotocol offered is taken), then a text control message,
// {"type":"control","status":"connected"} or, for a session that does not exist or has
// ended, {"type":"control","status":"error","error":…} and the connection dropped without a
// close frame. Binary messages carry the terminal's bytes both ways; when the shell exits
// the socket closes with 1000 and {"exitCode":0}, or 1011 and {"exitCode":n,"exitReason":…}.
func (f *fakeDaytona) connectPty(w http.ResponseWriter, r *http.Request, b *fakeBox, id string) {
	var protocols []string
	for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
		if p = strings.TrimSpace(p); strings.HasPrefix(p, "X-Daytona-SDK-Version~") {
			protocols = append(protocols, p)
			break
		}
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: protocols, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	conn.SetReadLimit(64 << 20)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	control := func(m map[string]string) error {
		m["type"] = "control"
		data, _ := json.Marshal(m)
		return conn.Write(ctx, websocket.MessageText, data)
	}
	f.mu.Lock()
	p := b.ptys[id]
	f.mu.Unlock()
	if p == nil {
		control(map[string]string{"status": "error", "error": "Failed to connect to PTY session: PTY session " + id + " not found"})
		conn.CloseNow()
		return
	}
	ex, err := f.cli.ExecCreate(ctx, b.ctr, client.ExecCreateOptions{Cmd: []string{"/bin/sh"}, User: fakeUser,
		WorkingDir: p.cwd, Env: []string{"TERM=xterm-256color"}, TTY: true, AttachStdin: true, AttachStdout: true,
		ConsoleSize: client.ConsoleSize{Height: uint(p.rows), Width: uint(p.cols)}})
	if err != nil {
		control(map[string]string{"status": "error", "error": "Failed to connect to PTY session: " + err.Error()})
		conn.CloseNow()
		return
	}
	hr, err := f.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: true})
	if err != nil {
		control(map[string]string{"status": "error", "error": "Failed to connect to PTY session: " + err.Error()})
		conn.CloseNow()
		return
	}
	var once sync.Once
	shut := func() {
		once.Do(func() {
			cancel()
			hr.Close()
			conn.CloseNow()
		})
	}
	f.mu.Lock()
	p.close = shut
	b.conns++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		b.conns--
		b.active = time.Now()
		f.mu.Unlock()
		shut()
	}()
	if control(map[string]string{"status": "connected"}) != nil {
		return
	}
	go func() {
		defer shut()
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if _, err := hr.Conn.Write(data); err != nil {
				return
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
			code := f.execExit(ctx, ex.ID)
			if code == 0 {
				conn.Close(websocket.StatusNormalClosure, `{"exitCode":0}`)
				return
			}
			reason := "non-zero exit"
			if code > 128 {
				reason = fmt.Sprintf("signal %d", code-128)
			}
			data, _ := json.Marshal(map[string]any{"exitCode": code, "exitReason": reason})
			conn.Close(websocket.StatusInternalError, string(data))
			return
		}
	}
}

// execExit waits, briefly, for a docker exec whose output ended to report its exit code.
func (f *fakeDaytona) execExit(ctx context.Context, id string) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ei, err := f.cli.ExecInspect(ctx, id, client.ExecInspectOptions{})
		if err != nil || !ei.Running || time.Now().After(deadline) {
			if err != nil {
				return -1
			}
			return ei.ExitCode
		}
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(20 * time.Millisecond):
		}
	}
}
