//go:build unix

package vercel

// The fake's command routes: start (with its NDJSON stream), get, logs, kill.

import (
	"context"
	"encoding/json"
	"net/http"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

func (c *fCmd) json() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]any{"id": c.id, "name": c.name, "args": c.args, "cwd": c.cwd, "sessionId": c.session, "exitCode": nil, "startedAt": c.started}
	if c.exitCode != nil {
		m["exitCode"] = *c.exitCode
		m["durationMs"] = nowMs() - c.started
	}
	return m
}

func (c *fCmd) add(line map[string]any) {
	c.mu.Lock()
	c.logs = append(c.logs, line)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// since returns the log lines from i, whether the command has finished, and a channel
// closed on the next change.
func (c *fCmd) since(i int) ([]map[string]any, bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.logs[i:]...), c.exitCode != nil, c.changed
}

type streamWriter struct {
	c      *fCmd
	stream string
}

func (s streamWriter) Write(p []byte) (int, error) {
	s.c.add(map[string]any{"stream": s.stream, "data": string(p)})
	return len(p), nil
}

// runCommand starts a command. Its body is what api-client.ts runCommand sends: command,
// args, env and sudo always; cwd and timeout when set; wait: true, or no wait at all; logs:
// true, only with wait. The answer is the command (without wait), or an NDJSON stream: the
// command, its log lines when logs is true (none otherwise, as the official mock), and the
// finished command.
func (f *fake) runCommand(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Cwd     *string           `json:"cwd"`
		Env     map[string]string `json:"env"`
		Sudo    *bool             `json:"sudo"`
		Wait    *bool             `json:"wait"`
		Logs    *bool             `json:"logs"`
		Timeout *int64            `json:"timeout"`
	}
	s, sb := f.session(w, r, true)
	if s == nil || !decode(w, r, &b) {
		return
	}
	switch {
	case b.Command == "" || b.Args == nil || b.Env == nil || b.Sudo == nil:
		apiError(w, http.StatusBadRequest, "bad_request", "command, args, env and sudo are required")
		return
	case b.Wait != nil && !*b.Wait:
		apiError(w, http.StatusBadRequest, "bad_request", "wait is true or left out")
		return
	case b.Logs != nil && (!*b.Logs || b.Wait == nil):
		apiError(w, http.StatusBadRequest, "bad_request", "logs is true, with wait, or left out")
		return
	case b.Timeout != nil && *b.Timeout <= 0:
		apiError(w, http.StatusBadRequest, "bad_request", "timeout must be a positive number of milliseconds")
		return
	}
	cwd := "/vercel/sandbox"
	if b.Cwd != nil {
		cwd = *b.Cwd
	}
	env := []string{}
	for k, v := range b.Env {
		env = append(env, k+"="+v)
	}
	ctx := context.WithoutCancel(r.Context())
	ex, err := f.cli.ExecCreate(ctx, sb.containerID, client.ExecCreateOptions{Cmd: append([]string{b.Command}, b.Args...),
		Env: env, WorkingDir: cwd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	hr, err := f.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	c := &fCmd{id: "cmd_" + randHex(6), session: s.id, name: b.Command, args: b.Args, cwd: cwd, started: nowMs(),
		execID: ex.ID, changed: make(chan struct{})}
	f.mu.Lock()
	f.cmds[c.id] = c
	f.cmdStarts++
	f.mu.Unlock()
	var deadline *time.Timer
	if b.Timeout != nil {
		// The sandbox enforces the timeout with SIGKILL, awaited or not (session.ts).
		deadline = time.AfterFunc(time.Duration(*b.Timeout)*time.Millisecond, func() { f.signal(ctx, c, syscall.SIGKILL) })
	}
	go func() {
		defer hr.Close()
		stdcopy.StdCopy(streamWriter{c, "stdout"}, streamWriter{c, "stderr"}, hr.Reader)
		if deadline != nil {
			deadline.Stop()
		}
		code := -1
		if info, err := f.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{}); err == nil {
			code = info.ExitCode
		}
		c.mu.Lock()
		c.exitCode = &code
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}()
	if b.Wait == nil {
		f.send(w, r, vCommandResponse, map[string]any{"command": c.json()})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	f.line(w, r, vCommandResponse, map[string]any{"command": c.json()})
	w.(http.Flusher).Flush()
	f.mu.Lock()
	cut := f.cutWaitAfter
	f.mu.Unlock()
	f.streamLogs(w, r, c, cut, b.Logs != nil, true)
}

// line writes one NDJSON line after checking it against s.
func (f *fake) line(w http.ResponseWriter, r *http.Request, s schema, v any) {
	if err := conforms(s, v); err != nil {
		f.t.Errorf("fake: a line of %s %s breaks validators.ts: %v", r.Method, r.URL.Path, err)
	}
	json.NewEncoder(w).Encode(v)
}

// streamLogs writes a command's log lines (when logs) as NDJSON until it finishes (then
// the finished command when withCommand), or cuts the connection after cut lines.
func (f *fake) streamLogs(w http.ResponseWriter, r *http.Request, c *fCmd, cut int, logs, withCommand bool) {
	sent := 0
	for {
		lines, done, changed := c.since(sent)
		for _, l := range lines {
			if cut > 0 && sent >= cut {
				panic(http.ErrAbortHandler) // the connection breaks mid-stream
			}
			if logs {
				f.line(w, r, vLogLine, l)
			}
			sent++
		}
		w.(http.Flusher).Flush()
		if done {
			if withCommand {
				f.line(w, r, vCommandFinishedResp, map[string]any{"command": c.json()})
			}
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

func (f *fake) command(w http.ResponseWriter, r *http.Request) *fCmd {
	s, _ := f.session(w, r, false)
	if s == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cmds[r.PathValue("cmd")]
	if !ok || c.session != s.id {
		apiError(w, http.StatusNotFound, "not_found", "command not found")
		return nil
	}
	return c
}

// getCommand returns a command; ?wait=true (api-client.ts getCommand) holds the answer
// until it has finished, parsed then as CommandFinishedResponse.
func (f *fake) getCommand(w http.ResponseWriter, r *http.Request) {
	wait, ok := queryFlag(w, r, "wait")
	if !ok {
		return
	}
	c := f.command(w, r)
	if c == nil {
		return
	}
	if !wait {
		f.send(w, r, vCommandResponse, map[string]any{"command": c.json()})
		return
	}
	for {
		_, done, changed := c.since(0)
		if done {
			break
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
	f.send(w, r, vCommandFinishedResp, map[string]any{"command": c.json()})
}

func (f *fake) logs(w http.ResponseWriter, r *http.Request) {
	c := f.command(w, r)
	if c == nil {
		return
	}
	f.mu.Lock()
	cut := 0
	if f.cutLogsTimes > 0 {
		f.cutLogsTimes--
		cut = 1
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	f.streamLogs(w, r, c, cut, true, false)
}

// kill signals a command: {signal} always, a number (api-client.ts killCommand, from
// resolveSignal). A command that has finished is answered as it is, as the official mock
// does.
func (f *fake) kill(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Signal *int `json:"signal"`
	}
	c := f.command(w, r)
	if c == nil || !decode(w, r, &b) {
		return
	}
	if b.Signal == nil || *b.Signal < 1 || *b.Signal > 64 {
		apiError(w, http.StatusBadRequest, "bad_request", "signal must be a signal number, 1 to 64")
		return
	}
	if err := f.signal(r.Context(), c, syscall.Signal(*b.Signal)); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	f.send(w, r, vCommandResponse, map[string]any{"command": c.json()})
}

// signal sends sig to a command's process, if it still runs.
func (f *fake) signal(ctx context.Context, c *fCmd, sig syscall.Signal) error {
	info, err := f.cli.ExecInspect(ctx, c.execID, client.ExecInspectOptions{})
	if err != nil || !info.Running {
		return nil
	}
	if err := syscall.Kill(info.PID, sig); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}
