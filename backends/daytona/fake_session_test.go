package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// The fake toolbox's process sessions, as the Daytona daemon serves them: a command runs
// asynchronously with its input pipe held open and empty; its log interleaves stdout and
// stderr line by line, each line prefixed with 0x01 0x01 0x01 (stdout) or 0x02 0x02 0x02
// (stderr), a last line without a newline getting one and NUL bytes dropped (the daemon
// labels lines with a shell `read` loop); the log can be followed over a WebSocket while the
// command runs, from its start, and the stream ends once the command has ended and its log
// is sent; the command's exit code appears in GET …/command/{id}. Deleting a session ends
// its followers but, as in the daemon's older versions, does not kill the command's
// processes: the client must (the backend does, through process/execute).

type fakeSession struct {
	cmds map[string]*fakeCommand
	gone chan struct{} // closed when the session is deleted
}

type fakeCommand struct {
	id, command string

	mu      sync.Mutex
	log     []byte
	exit    *int
	changed chan struct{} // closed and replaced on every change
}

func newFakeCommand(id, command string) *fakeCommand {
	return &fakeCommand{id: id, command: command, changed: make(chan struct{})}
}

// view returns the log from offset, whether the command ended, and a channel closed on
// the next change.
func (c *fakeCommand) view(offset int) ([]byte, bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.log[min(offset, len(c.log)):]...), c.exit != nil, c.changed
}

func (c *fakeCommand) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// labeler writes one stream's lines to the command's log, each with the stream's prefix.
type labeler struct {
	c      *fakeCommand
	prefix []byte
	part   []byte
}

func (l *labeler) Write(p []byte) (int, error) {
	n := len(p)
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.part = append(l.part, p...)
			return n, nil
		}
		l.emit(append(l.part, p[:i]...))
		l.part, p = l.part[:0], p[i+1:]
	}
}

// flush writes a last line that had no newline, with one.
func (l *labeler) flush() {
	if len(l.part) > 0 {
		l.emit(l.part)
		l.part = nil
	}
}

func (l *labeler) emit(line []byte) {
	line = bytes.ReplaceAll(line, []byte{0}, nil)
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	l.c.log = append(l.c.log, l.prefix...)
	l.c.log = append(l.c.log, line...)
	l.c.log = append(l.c.log, '\n')
	l.c.notifyLocked()
}

func (f *fakeDaytona) processSession(w http.ResponseWriter, r *http.Request, op string, b *fakeBox, params map[string]string, body []byte) {
	sid := params["sessionId"]
	f.mu.Lock()
	sess := b.sessions[sid]
	f.mu.Unlock()
	if op != "CreateSession" && sess == nil {
		daemonError(w, r, http.StatusNotFound, "session not found")
		return
	}
	switch op {
	case "CreateSession":
		var req createSessionRequest
		json.Unmarshal(body, &req)
		f.mu.Lock()
		defer f.mu.Unlock()
		if b.sessions[req.SessionID] != nil {
			daemonError(w, r, http.StatusConflict, "session already exists")
			return
		}
		b.sessions[req.SessionID] = &fakeSession{cmds: map[string]*fakeCommand{}, gone: make(chan struct{})}
		w.WriteHeader(http.StatusCreated)
	case "SessionExecuteCommand":
		var req sessionExecuteRequest
		json.Unmarshal(body, &req)
		if strings.TrimSpace(req.Command) == "" {
			daemonAbort(w, http.StatusBadRequest)
			return
		}
		c := newFakeCommand(randomID(), req.Command)
		f.mu.Lock()
		sess.cmds[c.id] = c
		f.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			out := &labeler{c: c, prefix: []byte{1, 1, 1}}
			errw := &labeler{c: c, prefix: []byte{2, 2, 2}}
			code, err := f.runStreams(f.bg, b, fakeUser, fakeHome, nil, []string{"sh", "-c", req.Command}, true, out, errw)
			out.flush()
			errw.flush()
			if err != nil {
				code = -1
			}
			c.mu.Lock()
			c.exit = &code
			c.notifyLocked()
			c.mu.Unlock()
		}()
		if req.RunAsync {
			// The daemon's SessionExecuteResponse has no omitempty: what it does not know yet
			// is null.
			writeJSON(w, http.StatusAccepted, map[string]any{"cmdId": c.id, "output": nil, "stdout": nil, "stderr": nil, "exitCode": nil})
			return
		}
		<-done
		logs, _, _ := c.view(0)
		res := map[string]any{"cmdId": c.id, "exitCode": *c.exit}
		switch {
		case !splitOutput(r.Header):
			res["output"] = string(stripLabels(logs))
		case serverDemux(r.Header):
			stdout, stderr := demuxLog(logs)
			res["output"], res["stdout"], res["stderr"] = string(logs), string(stdout), string(stderr)
		default:
			res["output"] = string(logs)
		}
		writeJSON(w, http.StatusOK, res)
	case "GetSessionCommand":
		c := f.command(sess, params["commandId"])
		if c == nil {
			daemonError(w, r, http.StatusNotFound, "command not found")
			return
		}
		// The daemon's Command leaves exitCode out while the command runs (omitempty).
		c.mu.Lock()
		out := map[string]any{"id": c.id, "command": c.command}
		if c.exit != nil {
			out["exitCode"] = *c.exit
		}
		c.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
	case "GetSessionCommandLogs":
		c := f.command(sess, params["commandId"])
		if c == nil {
			daemonError(w, r, http.StatusNotFound, "command not found")
			return
		}
		split := splitOutput(r.Header)
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			logs, _, _ := c.view(0)
			if !split {
				logs = stripLabels(logs)
			} else if serverDemux(r.Header) {
				stdout, stderr := demuxLog(logs)
				writeJSON(w, http.StatusOK, map[string]string{"output": string(logs), "stdout": string(stdout), "stderr": string(stderr)})
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write(logs)
			return
		}
		f.followLog(w, r, sess, c, r.URL.Query().Get("follow") == "true", split)
	case "DeleteSession":
		f.mu.Lock()
		mine := b.sessions[sid] == sess
		delete(b.sessions, sid)
		f.mu.Unlock()
		if !mine {
			daemonError(w, r, http.StatusNotFound, "session not found")
			return
		}
		close(sess.gone)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (f *fakeDaytona) command(sess *fakeSession, id string) *fakeCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sess.cmds[id]
}

// followLog sends the command's log over a WebSocket from its start, as binary messages, and
// (when following) what is added while the command runs; the stream ends normally once the
// command ended and everything was sent, or when the session is deleted.
func (f *fakeDaytona) followLog(w http.ResponseWriter, r *http.Request, sess *fakeSession, c *fakeCommand, follow, split bool) {
	var protocols []string
	if p := sdkVersion(http.Header{"Sec-WebSocket-Protocol": r.Header.Values("Sec-WebSocket-Protocol")}); p != "" {
		protocols = []string{"X-Daytona-SDK-Version~" + p}
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: protocols, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer conn.CloseNow()
	ctx := conn.CloseRead(context.WithoutCancel(r.Context()))
	f.mu.Lock()
	cut := f.logCuts > 0
	if cut {
		f.logCuts--
	}
	f.mu.Unlock()
	offset := 0
	for {
		data, ended, changed := c.view(offset)
		if len(data) > 0 {
			msg := data
			if !split {
				msg = stripLabels(data)
			}
			if err := conn.Write(ctx, websocket.MessageBinary, msg); err != nil {
				return
			}
			if cut {
				conn.Close(websocket.StatusNormalClosure, "")
				return
			}
			offset += len(data)
			continue
		}
		if ended || !follow {
			conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		select {
		case <-changed:
		case <-sess.gone:
			conn.Close(websocket.StatusNormalClosure, "")
			return
		case <-ctx.Done():
			return
		case <-f.stopped:
			return
		}
	}
}

// files serves the toolbox file routes the fallback uses: download and list.
func (f *fakeDaytona) files(w http.ResponseWriter, r *http.Request, op string, b *fakeBox) {
	p := r.URL.Query().Get("path")
	if !path.IsAbs(p) {
		p = path.Join(fakeHome, p)
	}
	ctx := r.Context()
	switch op {
	case "DownloadFile":
		out, code, err := f.run(ctx, b, fakeUser, "", nil, []string{"sh", "-c", `[ -f "$1" ] || exit 3; cat -- "$1"`, "sh", p})
		switch {
		case err != nil:
			daemonAbort(w, http.StatusBadRequest)
		case code == 3:
			daemonAbort(w, http.StatusNotFound)
		case code != 0:
			daemonAbort(w, http.StatusBadRequest)
		default:
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(out)
		}
	case "ListFiles":
		out, code, err := f.run(ctx, b, fakeUser, "", nil, []string{"sh", "-c",
			`cd -- "$1" 2>/dev/null || exit 3; for e in * .[!.]* ..?*; do [ -e "$e" ] || [ -L "$e" ] || continue; stat -c '%s|%f|%Y|%n' -- "$e"; done`, "sh", p})
		switch {
		case err != nil:
			daemonAbort(w, http.StatusBadRequest)
		case code == 3:
			daemonAbort(w, http.StatusNotFound)
		case code != 0:
			daemonAbort(w, http.StatusBadRequest)
		default:
			list := []map[string]any{}
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				parts := strings.SplitN(l, "|", 4)
				if len(parts) != 4 {
					continue
				}
				size, _ := strconv.ParseInt(parts[0], 10, 64)
				raw, _ := strconv.ParseUint(parts[1], 16, 32)
				secs, _ := strconv.ParseInt(parts[2], 10, 64)
				mode := fs.FileMode(raw & 0o777)
				if raw&0o170000 == 0o040000 {
					mode |= fs.ModeDir
				}
				mt := time.Unix(secs, 0).UTC()
				list = append(list, map[string]any{"name": parts[3], "size": size, "isDir": mode.IsDir(), "mode": mode.String(),
					"permissions": fmt.Sprintf("%#o", raw&0o7777), "owner": "sandbox", "group": "sandbox",
					"modTime": mt.String(), "modifiedAt": mt.Format(time.RFC3339Nano)})
			}
			writeJSON(w, http.StatusOK, list)
		}
	}
}
