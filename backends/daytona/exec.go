package daytona

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// session is a channel session (commands, jobs, files and the terminal over the helper
// stream) plus the sandbox it lives in.
type session struct {
	*channel.Session
	b    *Backend
	name string

	mu        sync.Mutex
	sandboxID string        // guarded by mu
	gone      chan struct{} // closed by Close: commands over toolbox sessions are abandoned
	// fallback says why commands go through toolbox process sessions ("" while the helper
	// is used); see fallback.go.
	fallback  string  // guarded by mu
	recreated bool    // guarded by mu; to report from the fallback path
	state     fbState // guarded by mu; the fallback's last saved shell state
	moded     bool    // guarded by mu; the session record names the mode in use
}

// Exec runs cmd over the helper, or in a toolbox process session of its own when the helper
// cannot run (daytona.channel: session, or auto after the helper failed).
func (s *session) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	if !s.usesSessions() {
		res, err := s.Session.Exec(ctx, cmd)
		if !isFallback(err) {
			return res, err
		}
	}
	return s.execSession(ctx, cmd)
}

// Close detaches from the helper; the sandbox stays.
func (s *session) Close() error {
	s.mu.Lock()
	if !s.isClosed() {
		close(s.gone)
	}
	s.mu.Unlock()
	return s.Session.Close()
}

func (s *session) isClosed() bool {
	select {
	case <-s.gone:
		return true
	default:
		return false
	}
}

// start is the channel's Starter: it brings the session's sandbox up (creating or waking
// it), installs the helper if the sandbox lacks it, and attaches to it over a PTY.
func (s *session) start(ctx context.Context) (channel.Started, error) {
	b := s.b
	if b.isClosed() {
		return channel.Started{}, &sandbox.Error{Backend: Name, Op: "start", ID: s.name, Err: sandbox.ErrClosed}
	}
	var client *agent.Client
	recreated := false
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		known := s.sandboxID
		s.mu.Unlock()
		sb, rec, err := b.ensure(ctx, s.name, known)
		if err != nil {
			return channel.Started{}, err
		}
		recreated = recreated || rec
		s.mu.Lock()
		s.sandboxID = sb.ID
		s.mu.Unlock()
		client, err = b.helper(ctx, sb)
		if err == nil {
			break
		}
		// A sandbox that stopped (auto-stop, someone else) between the start and the
		// helper is started again; a helper that fails in a running sandbox is a real error,
		// or the reason to fall back to toolbox sessions.
		if attempt == 2 || ctx.Err() != nil || b.isStarted(ctx, sb.ID) {
			return channel.Started{}, s.helperFailed(err, recreated)
		}
		b.log.Debug("sandbox stopped while the helper started; again", "sandbox", sb.Name, "err", err)
	}
	// terminal.env_passthrough values travel inside the protocol, never in the sandbox's
	// environment on Daytona's side nor on a command line.
	if env := b.passthrough(); len(env) > 0 {
		if err := client.SeedEnv(ctx, env); err != nil {
			client.Close()
			return channel.Started{}, &sandbox.Error{Backend: Name, Op: "pass environment", ID: s.name, Err: err}
		}
	}
	if recreated {
		b.log.Info("session's sandbox was recreated; earlier state is gone", "session", s.name)
	}
	s.recordMode(modeHelper)
	return channel.Started{Client: client, Recreated: recreated}, nil
}

// helperFailed decides what a helper that cannot run means: with daytona.channel auto the
// session falls back to toolbox sessions (said once in the log, and in Warnings and
// Capabilities); with helper it is an error that says so.
func (s *session) helperFailed(err error, recreated bool) error {
	var fb *errFallback
	if !errors.As(err, &fb) {
		return err
	}
	if s.b.cfg.Channel == config.DaytonaChannelHelper {
		// The cause is kept as text: the session must not take this error for a fallback.
		return &sandbox.Error{Backend: Name, Op: "start helper", ID: s.name, Err: sandbox.WithHint(sandbox.ErrUnavailable, errors.New(fb.Error()),
			"daytona.channel is helper: set it to auto or session to run each command as a toolbox process session instead")}
	}
	s.mu.Lock()
	s.fallback = fb.reason
	s.recreated = s.recreated || recreated
	s.mu.Unlock()
	s.b.noteFallback(s.name, fb.reason)
	return err
}

// helper installs the helper if needed and attaches to it.
// A sandbox woken from sleep still has the helper this process installed or found, so the
// line that started it is tried again first, saving the probe.
func (b *Backend) helper(ctx context.Context, sb sandboxInfo) (*agent.Client, error) {
	tb := b.api.toolbox(sb)
	b.agentMu.Lock()
	known := b.started[sb.ID]
	b.agentMu.Unlock()
	if known != "" {
		c, err := b.attach(ctx, tb, sb, known)
		if err == nil || ctx.Err() != nil {
			return c, err
		}
		b.log.Debug("the helper did not start where it was; probing", "sandbox", sb.Name, "err", err)
	}
	cmdline, err := b.installHelper(ctx, tb, sb)
	if err != nil {
		return nil, err
	}
	c, err := b.attach(ctx, tb, sb, cmdline)
	if err == nil {
		b.agentMu.Lock()
		b.started[sb.ID] = cmdline
		b.agentMu.Unlock()
	}
	return c, err
}

// isStarted reports whether the sandbox is (still) started.
func (b *Backend) isStarted(ctx context.Context, id string) bool {
	sb, err := b.api.get(ctx, id)
	return err == nil && sb.State == "started"
}

// passthrough returns the terminal.env_passthrough values of the caller's environment.
func (b *Backend) passthrough() map[string]string { return b.opts.PassthroughMap() }

// helperFor is the helper binary for arch: Extra.HelperBinary when set, else the built one.
func (b *Backend) helperFor(arch string) (*agentbin.Binary, error) {
	if b.extra.HelperBinary != nil {
		return agentbin.FromBytes(b.extra.HelperBinary, nil), nil
	}
	bin, err := b.helperBin.Load(arch)
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "helper", Err: fmt.Errorf("%v: %w", err, sandbox.ErrUnavailable)}
	}
	return bin, nil
}

// helperDir is where the helper and its state live in the sandbox, under the home
// directory (kept while the sandbox sleeps).
const helperDir = ".hermes-sandbox"

// probeScript prints the machine, the home directory and the helpers already installed.
const probeScript = `uname -m; printf '%s\n' "$HOME"; ls "$HOME/` + helperDir + `" 2>/dev/null; true`

// installHelper makes sure the sandbox has the helper for its architecture (one toolbox
// call when it does, an upload when it does not) and returns the shell line that starts it.
func (b *Backend) installHelper(ctx context.Context, tb toolbox, sb sandboxInfo) (string, error) {
	res, err := tb.execute(ctx, "sh -c "+shQuote(probeScript), "", 30*time.Second)
	if err != nil {
		return "", b.apiErr("probe", sb.Name, err)
	}
	lines := strings.Split(strings.TrimRight(res.Result, "\n"), "\n")
	if res.ExitCode != 0 || len(lines) < 2 {
		return "", &sandbox.Error{Backend: Name, Op: "probe", ID: sb.Name, Err: fmt.Errorf("unexpected answer %q (exit %d): %w", res.Result, res.ExitCode, sandbox.ErrUnavailable)}
	}
	arch := agentbin.GoArch(strings.TrimSpace(lines[0]))
	if arch == "" {
		return "", &errFallback{reason: fmt.Sprintf("its machine is %q; the helper is built for x86_64 and aarch64 only", lines[0])}
	}
	home := strings.TrimSpace(lines[1])
	if !strings.HasPrefix(home, "/") {
		return "", &sandbox.Error{Backend: Name, Op: "probe", ID: sb.Name, Err: fmt.Errorf("the sandbox's home directory is %q, not an absolute path: %w", home, sandbox.ErrUnavailable)}
	}
	img, err := b.helperFor(arch)
	if err != nil {
		return "", &errFallback{reason: err.Error()}
	}
	dir := home + "/" + helperDir
	path := dir + "/" + img.Name()
	present := false
	for _, l := range lines[2:] {
		present = present || strings.TrimSpace(l) == img.Name()
	}
	if !present {
		b.log.Info("installing the helper", "sandbox", sb.Name, "bytes", img.Size)
		var ie *agentbin.InstallError
		if err := agentbin.Install(ctx, toolboxTarget{tb}, img, path); errors.As(err, &ie) && ie.CannotRun() {
			return "", &errFallback{reason: "installing it failed: " + err.Error()}
		} else if ie != nil {
			return "", &sandbox.Error{Backend: Name, Op: "install helper", ID: sb.Name, Err: fmt.Errorf("%w: %w", err, sandbox.ErrUnavailable)}
		} else if st := statusOf(err); st/100 == 4 && st != http.StatusUnauthorized && st != http.StatusRequestTimeout && st != http.StatusTooManyRequests {
			// The toolbox refused the file (a read-only or full home, a size limit): the
			// helper cannot be installed. No answer or a server error is only a failure.
			return "", &errFallback{reason: "uploading it failed: " + err.Error()}
		} else if err != nil {
			return "", b.apiErr("install helper", sb.Name, err)
		}
	}
	shell := b.opts.Shell
	if shell == "" {
		shell = "auto"
	}
	args := []string{shQuote(path)}
	for _, a := range append(img.Args, "serve") {
		args = append(args, shQuote(a))
	}
	args = append(args, "--state", shQuote(dir+"/state"), "--cwd", `"$PWD"`, "--shell", shQuote(shell))
	// The terminal becomes a clean 8-bit pipe (no echo, no line editing, no signals from
	// bytes, no CR/LF mapping) before the helper starts; what the shell echoed before that
	// is skipped by the client, which waits for the helper's greeting.
	// An interactive shell survives a failed exec: `exit` then ends the PTY, so the client
	// learns at once that the helper did not start.
	return "stty raw -echo -iexten -ixon -opost; exec " + strings.Join(args, " ") + " 2>>" + shQuote(dir+"/helper.log") + "; exit 127\n", nil
}

// toolboxTarget installs the helper through the toolbox's upload and execute
// (agentbin.Target).
type toolboxTarget struct{ tb toolbox }

func (t toolboxTarget) Write(ctx context.Context, p string, r io.Reader, _ int64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return t.tb.upload(ctx, p, data)
}

func (t toolboxTarget) Run(ctx context.Context, script string, args ...string) (int, string, error) {
	cmd := "sh -c " + shQuote(script) + " sh"
	for _, a := range args {
		cmd += " " + shQuote(a)
	}
	res, err := t.tb.execute(ctx, cmd, "", 60*time.Second)
	return res.ExitCode, res.Result, err
}

// attach opens a PTY session in the sandbox, connects to it over the toolbox WebSocket and
// starts the helper in it.
func (b *Backend) attach(ctx context.Context, tb toolbox, sb sandboxInfo, cmdline string) (*agent.Client, error) {
	var rnd [6]byte
	rand.Read(rnd[:])
	id, err := tb.createPty(ctx, ptyCreateRequest{ID: "hermes-" + hex.EncodeToString(rnd[:]), Cols: 200, Rows: 50})
	if err != nil {
		return nil, b.apiErr("create pty", sb.Name, err)
	}
	h := http.Header{}
	b.api.authorize(h)
	conn, resp, err := websocket.Dial(ctx, tb.ptyURL(id), &websocket.DialOptions{HTTPClient: b.api.hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode/100 != 1 {
			err = &apiError{Method: http.MethodGet, Path: "toolbox /process/pty/{id}/connect", Status: resp.StatusCode}
		} else {
			err = &netError{Method: http.MethodGet, Path: "toolbox /process/pty/{id}/connect", Err: err}
		}
		b.dropPty(tb, id)
		return nil, b.apiErr("connect pty", sb.Name, err)
	}
	conn.SetReadLimit(64 << 20)
	p := newWSPipe(conn, b.log.With("sandbox", sb.Name, "pty", id))
	closeFn := func() error {
		p.Close()
		b.dropPty(tb, id)
		return nil
	}
	if _, err := io.WriteString(p, cmdline); err != nil {
		closeFn()
		return nil, b.apiErr("start helper", sb.Name, &netError{Method: "WS", Path: "pty", Err: err})
	}
	client, err := agent.NewClient(ctx, p, p, closeFn)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &sandbox.Error{Backend: Name, Op: "start helper", ID: sb.Name, Err: ctx.Err()}
		}
		if cerr := p.controlErr(); cerr != nil {
			// The toolbox could not attach the socket to the PTY (it had ended or was never
			// there): the helper was never tried, so this is no reason to fall back.
			return nil, &sandbox.Error{Backend: Name, Op: "connect pty", ID: sb.Name, Err: sandbox.WithKind(sandbox.ErrUnavailable, cerr)}
		}
		// The shell could not exec it (a noexec home, a wrong binary) and ended the PTY.
		return nil, &errFallback{reason: "it did not start: " + err.Error()}
	}
	return client, nil
}

// dropPty deletes a PTY session, briefly and best-effort: closing its socket already hangs
// up its shell.
func (b *Backend) dropPty(tb toolbox, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := tb.deletePty(ctx, id); err != nil && statusOf(err) != http.StatusNotFound {
		b.log.Debug("delete pty", "pty", id, "err", err)
	}
}

// wsPipe turns a PTY WebSocket into a byte stream: binary messages carry the terminal's
// bytes both ways; text messages are the toolbox's control messages
// ({"type":"control","status":"connected"|"error","error":…}, the daemon's pty.attachWebSocket
// and ConnectPTYSession): an error one ends the stream and is kept, the others are logged.
type wsPipe struct {
	conn   *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	pr     *io.PipeReader
	done   chan struct{}
	wmu    sync.Mutex // serialises writes on conn
	once   sync.Once

	ctrlMu sync.Mutex
	ctrl   error // the toolbox's control error, set before the stream ends; guarded by ctrlMu
}

// ptyControl is a text message of the toolbox's PTY socket.
type ptyControl struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Error  string `json:"error"`
}

// controlErr returns the toolbox's control error that ended the stream, else nil.
func (p *wsPipe) controlErr() error {
	p.ctrlMu.Lock()
	defer p.ctrlMu.Unlock()
	return p.ctrl
}

func newWSPipe(conn *websocket.Conn, log *slog.Logger) *wsPipe {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	p := &wsPipe{conn: conn, ctx: ctx, cancel: cancel, pr: pr, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				if websocket.CloseStatus(err) != -1 || errors.Is(err, context.Canceled) {
					err = io.EOF
				}
				pw.CloseWithError(err)
				return
			}
			if typ == websocket.MessageText {
				var c ptyControl
				if json.Unmarshal(data, &c) == nil && c.Type == "control" && c.Status == "error" {
					err := fmt.Errorf("toolbox: %s", c.Error)
					p.ctrlMu.Lock()
					p.ctrl = err
					p.ctrlMu.Unlock()
					pw.CloseWithError(err)
					return
				}
				log.Debug("pty control message", "text", string(data))
				continue
			}
			if _, err := pw.Write(data); err != nil {
				return
			}
		}
	}()
	return p
}

func (p *wsPipe) Read(b []byte) (int, error) { return p.pr.Read(b) }

func (p *wsPipe) Write(b []byte) (int, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if err := p.conn.Write(p.ctx, websocket.MessageBinary, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Close closes the socket and waits for the reader to stop.
func (p *wsPipe) Close() error {
	p.once.Do(func() {
		p.cancel()
		p.conn.CloseNow()
		p.pr.Close()
		<-p.done
	})
	return nil
}

// shQuote quotes s as one word for the toolbox's shell.
var shQuote = sandbox.ShellQuote

var (
	_ sandbox.Session    = (*session)(nil)
	_ sandbox.JobRunner  = (*session)(nil)
	_ sandbox.FileSystem = (*session)(nil)
	_ sandbox.Terminal   = (*session)(nil)
)
