package daytona

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/hermes-sandbox/hermes-sandbox/internal/shellwrap"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// The session fallback, for sandboxes where the helper cannot run (daytona.channel: session,
// or auto after the helper failed): each command is one toolbox process session — create it,
// execute the command in it asynchronously, follow the command's log over a WebSocket while it
// runs, delete the session.
//
// The toolbox's log separates stdout from stderr, but line by line: each line gets a 3-byte
// prefix (0x01 0x01 0x01 for stdout, 0x02 0x02 0x02 for stderr), a last line without a newline
// gets one, and NUL bytes are lost to the shell that labels them. So the command's output
// does not go to the toolbox raw. A runner script sends the command's stdout and stderr to
// files and hex-encodes them (dd | od, a chunk as soon as it is written) onto its own stdout
// and stderr, which the toolbox labels; the client decodes them. Output streams while the
// command runs, byte for byte, stdout and stderr apart. After the command the runner prints a
// trailer: the exit code, whether the directory was missing, whether the state was saved
// (the wrapper left its pid file when it was not), and the session's saved state.
//
// State (cd, export) persists through shellwrap.Wrapper and a state file under
// ~/.hermes-sandbox/fallback. A timeout or cancel kills the command's process tree with
// shellwrap.KillTree through a second toolbox call (process/execute), then deletes the
// session; the sandbox keeps running. A command whose start is unknown is killed, never
// re-run.

// fbDir is where the fallback keeps its files, under the sandbox user's home.
const fbDir = helperDir + "/fallback"

// inlineMax is the largest command sent inline in the execute request; larger payloads,
// and those that are not UTF-8 (a JSON string cannot carry them), are uploaded as a file.
const inlineMax = 64 << 10

// stdinMax bounds the standard input the fallback uploads for a command.
const stdinMax = 16 << 20

// fbRunner is run as `sh -c RUNNER sh DIR SESSION ID STDIN MODE PAYLOAD [ARGS…]`; MODE,
// PAYLOAD and ARGS go to shellwrap.Wrapper. STDIN is a file to read ("" = /dev/null). The
// runner's own diagnostics (a shell's "Terminated") go nowhere, and the command runs as a
// job waited for, since some shells print that notice with the job's redirections in force;
// fd 3 is the toolbox's stderr.
//
// A toolbox session outlives the client that started it, so the command dies with its caller
// by a heartbeat: while the command runs the client writes ID.beat every Options.CallerBeat,
// and a watchdog kills the command's tree after HERMES_FB_SILENT seconds
// (Options.CallerSilence) without one.
var fbRunner = `exec 3>&2 2>/dev/null
command -v od >/dev/null && command -v dd >/dev/null || { echo "hermes-sandbox: running commands as toolbox sessions needs dd and od in the sandbox" >&3; exit 125; }
d=$1; st=$d/$2.env; p=$d/$3; in=${4:-/dev/null}; shift 4; __s=${HERMES_FB_SILENT:-20}; unset HERMES_FB_SILENT
mkdir -p "$d" && : >"$p.out" && : >"$p.err" || { echo "hermes-sandbox: cannot write to $d" >&3; exit 125; }
__fe() { exec 4<"$1"; n=0; while :; do f=0; [ -e "$p.done" ] && f=1; h=$(dd bs=16384 count=1 <&4 2>/dev/null | od -An -v -tx1); if [ -n "$h" ]; then printf '%s\n' "$h"; n=0; continue; fi; [ $f = 1 ] && break; n=$((n+1)); if [ $n -lt 25 ]; then sleep 0.02; elif [ $n -lt 100 ]; then sleep 0.1; else sleep 0.25; fi; done; }
__fe "$p.out" & __o=$!
__fe "$p.err" >&3 & __e=$!
HERMES_FB_NODIR=$p.nodir sh -c ` + shQuote(shellwrap.Wrapper) + ` sh "$st" "$p.pid" "$@" <"$in" >"$p.out" 2>"$p.err" &
__c=$!
( n=0; while sleep 1; do if [ -e "$p.beat" ]; then rm -f "$p.beat"; n=0; else n=$((n+1)); [ $n -ge $__s ] && { sh -c ` + shQuote(shellwrap.KillTree) + ` sh "$p.pid"; exit; }; fi; done ) >/dev/null 3>&- &
__b=$!
wait $__c; __rc=$?
kill $__b
: >"$p.done"
wait $__o $__e
printf 'x%s\n' "$__rc"
[ -e "$p.nodir" ] && echo n
[ -e "$p.pid" ] && echo u
echo s; od -An -v -tx1 "$st" 2>/dev/null; echo z
echo z >&3
rm -f "$p.out" "$p.err" "$p.done" "$p.nodir" "$p.pid" "$p.sh" "$p.in" "$p.beat"`

// fbKill is run through process/execute as `sh -c KILL sh ID`: it waits briefly for the
// command's pid file (a command killed just after it was sent may not have written it yet)
// and kills the command's process tree.
var fbKill = `p=$HOME/` + fbDir + `/$1; i=0; while [ ! -s "$p.pid" ] && [ ! -e "$p.done" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; exec sh -c ` +
	shQuote(shellwrap.KillTree) + ` sh "$p.pid"`

// beat writes the command's heartbeat file every Options.CallerBeat until ctx ends; the
// first one waits a period, so a short command costs no call.
func (s *session) beat(ctx context.Context, tb toolbox, sb sandboxInfo, id string) {
	t := time.NewTicker(s.b.extra.CallerBeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		home, err := s.b.home(ctx, tb, sb)
		if err == nil {
			err = tb.upload(ctx, home+"/"+fbDir+"/"+id+".beat", nil)
		}
		if err != nil && ctx.Err() == nil {
			s.b.log.Debug("heartbeat", "session", s.name, "err", err)
		}
	}
}

// errFallback says the helper cannot run in this sandbox.
type errFallback struct{ reason string }

func (e *errFallback) Error() string {
	return "the sandbox helper cannot run in this sandbox (" + e.reason + ")"
}
func (e *errFallback) Unwrap() error { return sandbox.ErrUnsupported }

// isFallback reports whether err says the helper cannot run (the session has just fallen
// back, so the call is made again over toolbox sessions).
func isFallback(err error) bool {
	var fb *errFallback
	return errors.As(err, &fb)
}

var randomID = shellwrap.RandomID

// fbState is the shell state the fallback's last command saved.
type fbState struct {
	known bool
	cwd   string
	env   map[string]string
}

// usesSessions reports whether the session's commands go through toolbox sessions.
func (s *session) usesSessions() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fallback != ""
}

// sandboxForFallback returns the session's sandbox, started.
func (s *session) sandboxForFallback(ctx context.Context) (sandboxInfo, bool, error) {
	s.mu.Lock()
	known := s.sandboxID
	s.mu.Unlock()
	sb, recreated, err := s.b.ensure(ctx, s.name, known)
	if err != nil {
		return sb, false, err
	}
	s.mu.Lock()
	s.sandboxID = sb.ID
	recreated = recreated || s.recreated
	s.recreated = false
	s.mu.Unlock()
	if recreated {
		s.b.log.Info("session's sandbox was recreated; earlier state is gone", "session", s.name)
		s.setState(fbState{})
	}
	s.recordMode(modeSession)
	return sb, recreated, nil
}

func (s *session) setState(st fbState) {
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
}

// home returns the sandbox user's home directory (asked once per sandbox): uploads need
// absolute paths.
func (b *Backend) home(ctx context.Context, tb toolbox, sb sandboxInfo) (string, error) {
	b.agentMu.Lock()
	h := b.homes[sb.ID]
	b.agentMu.Unlock()
	if h != "" {
		return h, nil
	}
	res, err := tb.execute(ctx, `sh -c 'printf %s "$HOME"'`, "", 30*time.Second)
	if err != nil {
		return "", b.apiErr("probe", sb.Name, err)
	}
	h = strings.TrimSpace(res.Result)
	if res.ExitCode != 0 || !strings.HasPrefix(h, "/") {
		return "", &sandbox.Error{Backend: Name, Op: "probe", ID: sb.Name, Err: fmt.Errorf("the sandbox's home directory is %q (exit %d): %w", h, res.ExitCode, sandbox.ErrUnavailable)}
	}
	b.agentMu.Lock()
	b.homes[sb.ID] = h
	b.agentMu.Unlock()
	return h, nil
}

// fbCommand is the command line for the toolbox session, and the files to upload first.
type fbCommand struct {
	line    string
	payload []byte // uploaded as ID.sh when set
}

// buildCommand renders cmd for the runner. Per-command variables (and terminal.env_passthrough
// values) are assignments in front of the runner, listed in HERMES_FB_CMDENV so that they win
// over the session's state and are not saved in it: they travel in the toolbox request, never
// on a process's command line. What a JSON string cannot carry, or what is too long for one
// line, goes in a file.
func (s *session) buildCommand(cmd sandbox.Command, id string, hasStdin bool) (fbCommand, error) {
	pass := s.b.passthrough()
	for k, v := range cmd.Env {
		pass[k] = v
	}
	env, err := shellwrap.Env(nil, pass)
	if err != nil {
		return fbCommand{}, fmt.Errorf("%v: %w", err, sandbox.ErrInvalidConfig)
	}
	names := strings.Fields(env["HERMES_FB_CMDENV"])
	inline := utf8.ValidString(cmd.Script) && len(cmd.Script) < inlineMax && utf8.ValidString(cmd.Dir)
	size := len(cmd.Script)
	for _, a := range cmd.Argv {
		inline = inline && utf8.ValidString(a)
		size += len(a) + 3
	}
	envInline := true
	for _, k := range names {
		envInline = envInline && utf8.ValidString(env[k])
		size += len(env[k]) + len(k) + 3
	}
	inline = inline && envInline && size < inlineMax
	var line strings.Builder
	if len(names) > 0 {
		line.WriteString("HERMES_FB_CMDENV=" + shQuote(strings.Join(names, " ")) + " ")
	}
	if cmd.Dir != "" {
		if !utf8.ValidString(cmd.Dir) || strings.ContainsRune(cmd.Dir, 0) {
			return fbCommand{}, fmt.Errorf("the directory %q is not UTF-8: %w", cmd.Dir, sandbox.ErrInvalidConfig)
		}
		line.WriteString("HERMES_FB_DIR=" + shQuote(cmd.Dir) + " ")
	}
	var out fbCommand
	if inline {
		for _, k := range names {
			line.WriteString(k + "=" + shQuote(env[k]) + " ")
		}
	} else {
		// Every per-command value goes in the file, set after the state is restored.
		var f bytes.Buffer
		for _, k := range names {
			f.WriteString(k + "=" + shQuote(env[k]) + "; export " + k + "\n")
		}
		if len(cmd.Argv) > 0 {
			words := make([]string, len(cmd.Argv))
			for i, a := range cmd.Argv {
				words[i] = shQuote(a)
			}
			f.WriteString("( exec " + strings.Join(words, " ") + " )\n")
		} else {
			f.WriteString(cmd.Script)
			f.WriteString("\n")
		}
		out.payload = f.Bytes()
	}
	stdin := "''"
	if hasStdin {
		stdin = `"$HOME"/` + fbDir + "/" + id + ".in"
	}
	line.WriteString(fmt.Sprintf("HERMES_FB_SILENT=%d ", int(s.b.extra.CallerSilence.Seconds())))
	line.WriteString("sh -c " + shQuote(fbRunner) + ` sh "$HOME"/` + fbDir + " " + shQuote(s.name) + " " + id + " " + stdin + " ")
	switch {
	case out.payload != nil:
		line.WriteString(`file "$HOME"/` + fbDir + "/" + id + ".sh")
	case len(cmd.Argv) > 0:
		line.WriteString("argv ''")
		for _, a := range cmd.Argv {
			line.WriteString(" " + shQuote(a))
		}
	default:
		line.WriteString("eval " + shQuote(cmd.Script))
	}
	out.line = line.String()
	return out, nil
}

// execSession runs cmd in a toolbox process session of its own.
func (s *session) execSession(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	b := s.b
	if cmd.Script == "" && len(cmd.Argv) == 0 {
		return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: fmt.Errorf("empty command: %w", sandbox.ErrInvalidConfig)}
	}
	if s.isClosed() {
		return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: sandbox.ErrClosed}
	}
	start := time.Now()
	var stdin []byte
	if cmd.Stdin != nil {
		data, err := io.ReadAll(io.LimitReader(cmd.Stdin, stdinMax+1))
		if err != nil {
			return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: fmt.Errorf("read stdin: %w", err)}
		}
		if len(data) > stdinMax {
			return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: fmt.Errorf(
				"standard input over %d MiB: toolbox sessions take input as a file uploaded before the command; write it with write_file instead: %w", stdinMax>>20, sandbox.ErrInvalidConfig)}
		}
		stdin = data
	}
	sb, recreated, err := s.sandboxForFallback(ctx)
	if err != nil {
		return nil, err
	}
	tb := b.api.toolbox(sb)
	id := randomID()
	fc, err := s.buildCommand(cmd, id, cmd.Stdin != nil)
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: err}
	}
	if fc.payload != nil || cmd.Stdin != nil {
		home, err := b.home(ctx, tb, sb)
		if err != nil {
			return nil, err
		}
		if fc.payload != nil {
			if err := tb.upload(ctx, home+"/"+fbDir+"/"+id+".sh", fc.payload); err != nil {
				return nil, b.apiErr("upload command", s.name, err)
			}
		}
		if cmd.Stdin != nil {
			if err := tb.upload(ctx, home+"/"+fbDir+"/"+id+".in", stdin); err != nil {
				return nil, b.apiErr("upload stdin", s.name, err)
			}
		}
	}
	sid := "hermes-" + id
	if err := tb.createSession(ctx, sid); err != nil {
		return nil, b.apiErr("create session", s.name, err)
	}
	abandoned := false
	// From here the session is deleted whatever happens, even after the caller gave up,
	// unless the caller went (Close) as a killed one would, without a word.
	defer func() {
		if abandoned {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if err := tb.deleteSession(dctx, sid); err != nil && statusOf(err) != http.StatusNotFound {
			b.log.Debug("delete toolbox session", "session_id", sid, "err", err)
		}
	}()
	cmdID, err := tb.sessionExec(ctx, sid, fc.line)
	if err != nil {
		if isNetErr(err) || ctx.Err() != nil || statusOf(err)/100 == 5 {
			// It may have started: make sure it is not running; never send it again.
			s.kill(ctx, tb, id)
		}
		return nil, b.apiErr("exec", s.name, err)
	}
	bctx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	beatDone := make(chan struct{})
	go func() {
		defer close(beatDone)
		s.beat(bctx, tb, sb, id)
	}()
	defer func() {
		stopBeat()
		<-beatDone
	}()
	capture := sandbox.NewCapture(cmd.OutputLimit, b.spillDir).ForSession(s.name, cmd.SpillLimit)
	stdout, stderr := capture.Tee(cmd.Stdout, cmd.Stderr)
	dec := &fbDecoder{out: stdout, err: stderr}
	// The follower reads until the runner's trailers, or until it is stopped after a kill or
	// when the session is closed under it.
	fctx, stopFollow := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFollow()
	followed := make(chan error, 1)
	go func() { followed <- s.follow(fctx, tb, sid, cmdID, dec) }()
	res := &sandbox.Result{EnvironmentRecreated: recreated}
	var ferr error
	ended := s.orGone(followed, stopFollow) // the follower's end from here on
	ferr, res.TimedOut, res.Interrupted = shellwrap.Await(ctx, cmd.Timeout, ended)
	if s.isClosed() && ferr != nil {
		// Closed while the command ran: nothing more is said to the sandbox, as after a
		// killed caller; the command dies when its heartbeat stops (see fbRunner).
		abandoned = true
		return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: sandbox.ErrClosed}
	}
	if res.TimedOut || res.Interrupted {
		s.kill(ctx, tb, id)
		// The runner outlives the command: it sends what was written and its trailer.
		select {
		case <-ended:
		case <-time.After(15 * time.Second):
			stopFollow()
			<-ended
		}
		res.ExitCode = sandbox.ExitTimeout
		if res.Interrupted {
			res.ExitCode = sandbox.ExitInterrupted
		}
	} else if ferr != nil {
		// The command's log is lost; it may still run: it is not left behind.
		s.kill(ctx, tb, id)
		return nil, b.apiErr("exec", s.name, ferr)
	} else {
		res.ExitCode = dec.code
	}
	if dec.trailer {
		st := fbState{known: true, cwd: ""}
		if env, err := shellwrap.ParseExports(string(dec.state)); err == nil {
			st.cwd = env["HERMES_FB_PWD"]
			delete(env, "HERMES_FB_PWD")
			st.env = env
			res.Cwd = st.cwd
			s.setState(st)
		}
	}
	if dec.trailer && dec.unsaved && !dec.nodir && !res.TimedOut && !res.Interrupted {
		res.StateNotSaved, res.StateError = true, shellwrap.StateNotSavedReason
	}
	if dec.nodir && !res.TimedOut && !res.Interrupted {
		return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: fmt.Errorf("no such directory %q: %w", cmd.Dir, sandbox.ErrNotFound)}
	}
	res.Duration = time.Since(start)
	if err := capture.Finish(res); err != nil {
		b.log.Warn("output spill failed", "err", err)
	}
	if res.Interrupted {
		return res, fmt.Errorf("exec interrupted: %w", ctx.Err())
	}
	return res, nil
}

// orGone passes on the follower's end, or stops it and ends with ErrClosed when the session
// is closed first.
func (s *session) orGone(followed <-chan error, stop func()) <-chan error {
	out := make(chan error, 1)
	go func() {
		select {
		case err := <-followed:
			out <- err
		case <-s.gone:
			stop()
			<-followed
			out <- sandbox.ErrClosed
		}
	}()
	return out
}

// kill kills the process tree of command id through a second toolbox call.
func (s *session) kill(ctx context.Context, tb toolbox, id string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	res, err := tb.execute(kctx, "sh -c "+shQuote(fbKill)+" sh "+id, "", 25*time.Second)
	if err != nil || res.ExitCode != 0 {
		s.b.log.Warn("killing a command's processes failed", "session", s.name, "err", err, "exit", res.ExitCode, "output", res.Result)
	}
}

// follow reads the command's log over the toolbox WebSocket until the runner's trailers.
// A stream that ends early (a proxy cut it, an older toolbox that ends it at exit) is
// followed again, skipping what was already read: the toolbox sends the log from its start.
func (s *session) follow(ctx context.Context, tb toolbox, sid, cmdID string, dec *fbDecoder) error {
	h := http.Header{}
	s.b.api.authorize(h)
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, 2*time.Second)):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		before, began := dec.raw, time.Now()
		err := s.followOnce(ctx, tb.logsURL(sid, cmdID), h, dec)
		if dec.done() {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if dec.raw > before || (err == nil && time.Since(began) > 2*time.Second) {
			attempt = 0 // progress, or a stream that stayed up a while: not a failing one
		}
		if err != nil {
			last = err
		}
		if attempt >= 20 {
			// Nothing new for a while: ask whether the command ended without its trailer.
			if c, cerr := tb.sessionCommand(ctx, sid, cmdID); cerr == nil && c.ExitCode != nil {
				dec.code, dec.trailer = *c.ExitCode, false
				return nil
			}
			if last == nil {
				last = errors.New("the log stream ended before the command")
			}
			return last
		}
	}
}

// followOnce reads one WebSocket connection of the log.
func (s *session) followOnce(ctx context.Context, u string, h http.Header, dec *fbDecoder) error {
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: s.b.api.hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode/100 != 1 {
			return &apiError{Method: http.MethodGet, Path: "toolbox /process/session/{id}/command/{cmdId}/logs", Status: resp.StatusCode}
		}
		return &netError{Method: http.MethodGet, Path: "toolbox /process/session/{id}/command/{cmdId}/logs", Err: err}
	}
	defer conn.CloseNow()
	conn.SetReadLimit(64 << 20)
	skip := dec.raw
	for !dec.done() {
		_, data, err := conn.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return nil
			}
			return err
		}
		if skip > 0 {
			n := min(int64(len(data)), skip)
			data, skip = data[n:], skip-n
		}
		dec.write(data)
	}
	conn.Close(websocket.StatusNormalClosure, "")
	return nil
}

// fbDecoder splits the toolbox log into its stdout and stderr lines and decodes the runner's
// lines: hex-encoded output, then the trailer.
type fbDecoder struct {
	out, err io.Writer

	raw     int64  // bytes of the log consumed
	line    []byte // the partial line
	outDone bool
	errDone bool
	inState bool

	trailer bool // the runner's trailer arrived
	code    int
	nodir   bool
	unsaved bool // the wrapper left its pid file: the command's state was not saved
	state   []byte
}

var (
	prefixOut = []byte{1, 1, 1}
	prefixErr = []byte{2, 2, 2}
)

func (d *fbDecoder) done() bool { return d.outDone && d.errDone }

func (d *fbDecoder) write(p []byte) {
	d.raw += int64(len(p))
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			d.line = append(d.line, p...)
			return
		}
		d.line = append(d.line, p[:i]...)
		p = p[i+1:]
		d.handle(d.line)
		d.line = d.line[:0]
	}
}

// handle decodes one labelled line.
func (d *fbDecoder) handle(l []byte) {
	stderr := false
	switch {
	case bytes.HasPrefix(l, prefixOut):
		l = l[3:]
	case bytes.HasPrefix(l, prefixErr):
		l, stderr = l[3:], true
	}
	s := strings.TrimSpace(string(l))
	if stderr {
		if s == "z" {
			d.errDone = true
			return
		}
		d.decode(d.err, s, l)
		return
	}
	switch {
	case d.inState && s == "z":
		d.outDone, d.inState = true, false
	case d.inState:
		if b, ok := unhex(s); ok {
			d.state = append(d.state, b...)
		}
	case s == "z":
		d.outDone = true
	case s == "s":
		d.inState = true
	case s == "n":
		d.nodir = true
	case s == "u":
		d.unsaved = true
	case strings.HasPrefix(s, "x"):
		if _, err := fmt.Sscan(s[1:], &d.code); err == nil {
			d.trailer = true
		}
	default:
		d.decode(d.out, s, l)
	}
}

// decode writes a hex line's bytes to w; a line that is not hex (the runner's own complaint,
// such as a missing od) is passed on as it came, to stderr.
func (d *fbDecoder) decode(w io.Writer, s string, raw []byte) {
	if b, ok := unhex(s); ok {
		w.Write(b)
		return
	}
	d.err.Write(append(append([]byte(nil), raw...), '\n'))
}

// unhex decodes od's "68 69 0a" lines.
func unhex(s string) ([]byte, bool) {
	s = strings.ReplaceAll(s, " ", "")
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// ShellState returns the directory and exported environment the session's last command
// left. Over the fallback it is what that command's trailer carried; before any command in
// this process, a `true` is run to learn it.
func (s *session) ShellState(ctx context.Context) (string, map[string]string, error) {
	if !s.usesSessions() {
		cwd, env, err := s.Session.ShellState(ctx)
		if !isFallback(err) {
			return cwd, env, err
		}
	}
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	if !st.known {
		if _, err := s.execSession(ctx, sandbox.Command{Script: "true"}); err != nil {
			return "", nil, err
		}
		s.mu.Lock()
		st = s.state
		s.mu.Unlock()
	}
	env := make(map[string]string, len(st.env))
	for k, v := range st.env {
		env[k] = v
	}
	return st.cwd, env, nil
}

// Files over the toolbox file API ---------------------------------------------------------

// resolve makes p absolute: relative paths follow the session's directory.
func (s *session) resolve(ctx context.Context, p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return p, nil
	}
	cwd, _, err := s.ShellState(ctx)
	if err != nil {
		return "", err
	}
	if cwd == "" {
		sb, _, err := s.sandboxForFallback(ctx)
		if err != nil {
			return "", err
		}
		if cwd, err = s.b.home(ctx, s.b.api.toolbox(sb), sb); err != nil {
			return "", err
		}
	}
	return strings.TrimRight(cwd, "/") + "/" + p, nil
}

func (s *session) fileOp(ctx context.Context, p string) (toolbox, sandboxInfo, string, error) {
	if s.isClosed() {
		return toolbox{}, sandboxInfo{}, "", &sandbox.Error{Backend: Name, Op: "file", ID: s.name, Err: sandbox.ErrClosed}
	}
	abs, err := s.resolve(ctx, p)
	if err != nil {
		return toolbox{}, sandboxInfo{}, "", err
	}
	sb, _, err := s.sandboxForFallback(ctx)
	if err != nil {
		return toolbox{}, sandboxInfo{}, "", err
	}
	return s.b.api.toolbox(sb), sb, abs, nil
}

// ResolvePath resolves p over the helper (sandbox.PathResolver). Toolbox sessions cannot:
// there it fails with ErrUnsupported, and the gate judges p with ~ and the session's
// directory applied.
func (s *session) ResolvePath(ctx context.Context, p string) (string, error) {
	if !s.usesSessions() {
		r, err := s.Session.ResolvePath(ctx, p)
		if !isFallback(err) {
			return r, err
		}
	}
	return "", &sandbox.Error{Backend: Name, Op: "resolve " + p, ID: s.name,
		Err: fmt.Errorf("toolbox sessions cannot resolve paths: %w", sandbox.ErrUnsupported)}
}

// ReadFile reads up to limit bytes (0 = all) from offset.
func (s *session) ReadFile(ctx context.Context, p string, offset, limit int64) ([]byte, error) {
	if !s.usesSessions() {
		data, err := s.Session.ReadFile(ctx, p, offset, limit)
		if !isFallback(err) {
			return data, err
		}
	}
	tb, _, abs, err := s.fileOp(ctx, p)
	if err != nil {
		return nil, err
	}
	data, err := tb.download(ctx, abs)
	if err != nil {
		return nil, s.b.apiErr("read "+p, s.name, err)
	}
	if offset >= int64(len(data)) {
		return []byte{}, nil
	}
	data = data[offset:]
	if limit > 0 && int64(len(data)) > limit {
		data = data[:limit]
	}
	return data, nil
}

// WriteFile writes data to p atomically (an upload beside it, then a rename), creating parent
// directories.
func (s *session) WriteFile(ctx context.Context, p string, data []byte, mode uint32) error {
	if !s.usesSessions() {
		err := s.Session.WriteFile(ctx, p, data, mode)
		if !isFallback(err) {
			return err
		}
	}
	tb, sb, abs, err := s.fileOp(ctx, p)
	if err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o644
	}
	tmp := abs + ".hermes-tmp-" + randomID()
	if err := tb.upload(ctx, tmp, data); err != nil {
		return s.b.apiErr("write "+p, s.name, err)
	}
	script := fmt.Sprintf("chmod %o %s && mv -f %s %s || { rm -f %s; exit 1; }", mode&0o7777, shQuote(tmp), shQuote(tmp), shQuote(abs), shQuote(tmp))
	res, err := tb.execute(ctx, "sh -c "+shQuote(script), "", 30*time.Second)
	if err != nil {
		return s.b.apiErr("write "+p, s.name, err)
	}
	if res.ExitCode != 0 {
		return &sandbox.Error{Backend: Name, Op: "write " + p, ID: sb.Name, Err: fmt.Errorf("%s (exit %d)", strings.TrimSpace(res.Result), res.ExitCode)}
	}
	return nil
}

// ListDir lists a directory.
func (s *session) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	if !s.usesSessions() {
		list, err := s.Session.ListDir(ctx, p)
		if !isFallback(err) {
			return list, err
		}
	}
	tb, _, abs, err := s.fileOp(ctx, p)
	if err != nil {
		return nil, err
	}
	list, err := tb.listFiles(ctx, abs)
	if err != nil {
		return nil, s.b.apiErr("list "+p, s.name, err)
	}
	out := make([]sandbox.FileInfo, 0, len(list))
	for _, f := range list {
		fi := sandbox.FileInfo{Name: f.Name, Size: f.Size, Mode: f.Mode, IsDir: f.IsDir}
		fi.ModTime, _ = time.Parse(time.RFC3339Nano, f.ModifiedAt)
		out = append(out, fi)
	}
	return out, nil
}

// What needs the helper -----------------------------------------------------------------

func (s *session) noHelper(op string) error {
	s.mu.Lock()
	reason := s.fallback
	s.mu.Unlock()
	return &sandbox.Error{Backend: Name, Op: op, ID: s.name, Err: fmt.Errorf(
		"commands run as toolbox process sessions (%s); background jobs and the terminal need the helper: %w", reason, sandbox.ErrUnsupported)}
}

// StartJob starts a background job (helper only).
func (s *session) StartJob(ctx context.Context, cmd sandbox.Command) (sandbox.JobStatus, error) {
	if s.usesSessions() {
		return sandbox.JobStatus{}, s.noHelper("job start")
	}
	return s.Session.StartJob(ctx, cmd)
}

// Jobs lists background jobs (helper only).
func (s *session) Jobs(ctx context.Context) ([]sandbox.JobStatus, error) {
	if s.usesSessions() {
		return nil, s.noHelper("job list")
	}
	return s.Session.Jobs(ctx)
}

// PollJob returns a job's new output (helper only).
func (s *session) PollJob(ctx context.Context, id string) (sandbox.JobOutput, error) {
	if s.usesSessions() {
		return sandbox.JobOutput{}, s.noHelper("job poll")
	}
	return s.Session.PollJob(ctx, id)
}

// WaitJob waits for a job (helper only).
func (s *session) WaitJob(ctx context.Context, id string) (sandbox.JobOutput, error) {
	if s.usesSessions() {
		return sandbox.JobOutput{}, s.noHelper("job wait")
	}
	return s.Session.WaitJob(ctx, id)
}

// KillJob kills a job (helper only).
func (s *session) KillJob(ctx context.Context, id string) (sandbox.JobStatus, error) {
	if s.usesSessions() {
		return sandbox.JobStatus{}, s.noHelper("job kill")
	}
	return s.Session.KillJob(ctx, id)
}

// Shell runs an interactive shell (helper only: toolbox sessions have no terminal).
func (s *session) Shell(ctx context.Context, opts sandbox.TerminalOptions) (int, error) {
	if s.usesSessions() {
		return 0, s.noHelper("shell")
	}
	return s.Session.Shell(ctx, opts)
}
