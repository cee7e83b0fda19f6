package daytona

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/hermes-sandbox/hermes-sandbox/internal/shellwrap"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// The session fallback, for sandboxes where the helper cannot run (daytona.channel: session,
// or auto after the helper failed): each command runs through shellwrap.Run as one toolbox
// process session — create it, execute the command in it asynchronously, follow the command's
// log over a WebSocket while it runs, delete the session.
//
// The toolbox's log separates stdout from stderr, but line by line: each line gets a 3-byte
// prefix (0x01 0x01 0x01 for stdout, 0x02 0x02 0x02 for stderr), a last line without a newline
// gets one, and NUL bytes are lost to the shell that labels them. So the command's output
// does not go to the toolbox raw. A runner script sends the command's stdout and stderr to
// files and hex-encodes them (dd | od, a chunk as soon as it is written) onto its own stdout
// and stderr, which the toolbox labels; the client decodes them. Output streams while the
// command runs, byte for byte, stdout and stderr apart. After the command the runner prints a
// trailer: the exit code, whether the directory was missing, whether the state was saved
// (the wrapper left its pid file when it was not), and the session's saved state, which the
// process reports to shellwrap.Run (shellwrap.StateProcess).
//
// State (cd, export) persists in a state file under ~/.hermes-sandbox/fallback. A timeout or
// cancel kills the command's process tree with shellwrap.KillTree through a second toolbox
// call (process/execute), then deletes the session; the sandbox keeps running. A command
// whose start is unknown is killed, never re-run.

// fbDir is where the fallback keeps its files, under the sandbox user's home.
const fbDir = helperDir + "/fallback"

// inlineMax is the largest command sent inline in the execute request; larger payloads,
// and those that are not UTF-8 (a JSON string cannot carry them), are uploaded as a file.
const inlineMax = 64 << 10

// stdinMax bounds the standard input the fallback uploads for a command.
const stdinMax = 16 << 20

// fbRunner is run as `sh -c RUNNER sh PREFIX STATE STDIN FILE [ARGV…]`, PREFIX and STATE
// relative to $HOME: it runs ARGV (shellwrap.Run's wrapper), or the script PREFIX.sh when FILE
// is set, with its input from PREFIX.in when STDIN is set (else /dev/null). The runner's own
// diagnostics (a shell's "Terminated") go nowhere, and the command runs as a job waited for,
// since some shells print that notice with the job's redirections in force; fd 3 is the
// toolbox's stderr.
//
// A toolbox session outlives the client that started it, so the command dies with its caller
// by a heartbeat: while the command runs the client writes PREFIX.beat every
// Options.CallerBeat, and a watchdog kills the command's tree after HERMES_FB_SILENT seconds
// (Options.CallerSilence) without one.
var fbRunner = `exec 3>&2 2>/dev/null
command -v od >/dev/null && command -v dd >/dev/null || { echo "hermes-sandbox: running commands as toolbox sessions needs dd and od in the sandbox" >&3; exit 125; }
p=$HOME/$1; st=$HOME/$2; in=/dev/null; [ -n "$3" ] && in=$p.in; f=$4; shift 4; [ -n "$f" ] && set -- sh "$p.sh"; __s=${HERMES_FB_SILENT:-20}; unset HERMES_FB_SILENT
mkdir -p "${p%/*}" && : >"$p.out" && : >"$p.err" || { echo "hermes-sandbox: cannot write to ${p%/*}" >&3; exit 125; }
__fe() { exec 4<"$1"; n=0; while :; do f=0; [ -e "$p.done" ] && f=1; h=$(dd bs=16384 count=1 <&4 2>/dev/null | od -An -v -tx1); if [ -n "$h" ]; then printf '%s\n' "$h"; n=0; continue; fi; [ $f = 1 ] && break; n=$((n+1)); if [ $n -lt 25 ]; then sleep 0.02; elif [ $n -lt 100 ]; then sleep 0.1; else sleep 0.25; fi; done; }
__fe "$p.out" & __o=$!
__fe "$p.err" >&3 & __e=$!
HERMES_FB_NODIR=$p.nodir "$@" <"$in" >"$p.out" 2>"$p.err" &
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

// fbKill is run through process/execute as `sh -c KILL sh PREFIX`: it waits briefly for the
// command's pid file (a command killed just after it was sent may not have written it yet)
// and kills the command's process tree.
var fbKill = `p=$HOME/$1; i=0; while [ ! -s "$p.pid" ] && [ ! -e "$p.done" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; exec sh -c ` +
	shQuote(shellwrap.KillTree) + ` sh "$p.pid"`

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

func randomID() string { return sandbox.RandomHex(8) }

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

// execSession runs cmd in a toolbox process session of its own.
func (s *session) execSession(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	fail := func(err error) (*sandbox.Result, error) {
		return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: err}
	}
	switch {
	case cmd.Script == "" && len(cmd.Argv) == 0:
		return fail(fmt.Errorf("empty command: %w", sandbox.ErrInvalidConfig))
	case s.isClosed():
		return fail(sandbox.ErrClosed)
	case !utf8.ValidString(cmd.Dir) || strings.ContainsRune(cmd.Dir, 0):
		return fail(fmt.Errorf("the directory %q is not UTF-8: %w", cmd.Dir, sandbox.ErrInvalidConfig))
	}
	// terminal.env_passthrough values are per-command variables here, as cmd.Env's are: they
	// win over the session's state and are not saved in it.
	if pass := s.b.passthrough(); len(pass) > 0 {
		for k, v := range cmd.Env {
			pass[k] = v
		}
		cmd.Env = pass
	}
	sb, recreated, err := s.sandboxForFallback(ctx)
	if err != nil {
		return nil, err
	}
	p := &fbProvider{s: s, sb: sb, tb: s.b.api.toolbox(sb)}
	res, err := shellwrap.Run(ctx, p, shellwrap.Options{Backend: Name, Session: s.name, Dir: fbDir,
		SpillDir: s.b.spillDir, Log: s.b.log}, cmd)
	if res != nil {
		res.EnvironmentRecreated = recreated
	}
	return res, err
}

// fbProvider is shellwrap.Provider over toolbox process sessions in one sandbox. Its paths
// may be relative to the sandbox user's home.
type fbProvider struct {
	s  *session
	sb sandboxInfo
	tb toolbox
}

// fbProc is a command running in a toolbox session: its log is followed into dec.
type fbProc struct {
	p          *fbProvider
	prefix     string // the command's files, relative to $HOME
	sid        string // the toolbox session
	dec        *fbDecoder
	followed   chan error // the follower's end
	stopFollow func()
	stopBeat   func() // stops the heartbeat and waits for it
}

// Start runs c as the toolbox session's one command, behind fbRunner. Its variables are
// assignments in front of the runner: they travel in the toolbox request, never on a
// process's command line. What a JSON string cannot carry, or what is too long for one line,
// goes in a script uploaded first (PREFIX.sh), as does the standard input (PREFIX.in).
// Run's calls are all `/bin/sh -c SCRIPT sh ARGS…`.
func (p *fbProvider) Start(ctx context.Context, c shellwrap.Call) (shellwrap.Process, error) {
	s, b := p.s, p.s.b
	pr := &fbProc{p: p, prefix: strings.TrimSuffix(c.PidFile, ".pid"), sid: "hermes-" + randomID()}
	size, inline := 0, true
	var env, script strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		size, inline = size+len(k)+len(c.Env[k])+3, inline && utf8.ValidString(c.Env[k])
		env.WriteString(k + "=" + shQuote(c.Env[k]) + " ")
		script.WriteString(k + "=" + shQuote(c.Env[k]) + "; export " + k + "\n")
	}
	words := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		words[i] = shQuote(a)
		size, inline = size+len(a)+3, inline && utf8.ValidString(a)
	}
	// c is `/bin/sh -c SCRIPT sh ARGS…` (shellwrap.Run's wrapper): the file runs SCRIPT itself
	// with ARGS set, so that no long argument goes through an exec.
	script.WriteString("set -- " + strings.Join(words[min(4, len(words)):], " ") + "\n" + c.Argv[2] + "\n")
	files, stdin := map[string][]byte{}, "''"
	if c.Stdin != nil {
		data, err := io.ReadAll(io.LimitReader(c.Stdin, stdinMax+1))
		switch {
		case err != nil:
			err = fmt.Errorf("read stdin: %w", err)
		case len(data) > stdinMax:
			err = fmt.Errorf("standard input over %d MiB: toolbox sessions take input as a file uploaded before the command; "+
				"write it with write_file instead: %w", stdinMax>>20, sandbox.ErrInvalidConfig)
		}
		if err != nil {
			return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: err}
		}
		files[".in"], stdin = data, "1"
	}
	line := fmt.Sprintf("HERMES_FB_SILENT=%d sh -c %s sh %s %s %s ", int(b.extra.CallerSilence.Seconds()), shQuote(fbRunner),
		shQuote(pr.prefix), shQuote(c.State), stdin)
	if inline && size < inlineMax {
		line = env.String() + line + "'' " + strings.Join(words, " ")
	} else {
		line += "1"
		files[".sh"] = []byte(script.String())
	}
	for ext, data := range files {
		if err := p.WriteFile(ctx, pr.prefix+ext, data); err != nil {
			return nil, b.apiErr(map[string]string{".in": "upload stdin", ".sh": "upload command"}[ext], s.name, err)
		}
	}
	if err := p.tb.createSession(ctx, pr.sid); err != nil {
		return nil, b.apiErr("create session", s.name, err)
	}
	cmdID, err := p.tb.sessionExec(ctx, pr.sid, line)
	if err != nil {
		if isNetErr(err) || statusOf(err)/100 == 5 {
			// It may have started: make sure it is not running; never send it again.
			pr.Kill(ctx)
		}
		pr.deleteSession(ctx)
		return nil, b.apiErr("exec", s.name, err)
	}
	bctx, stopBeat := context.WithCancel(ctx)
	beatDone := make(chan struct{})
	go func() {
		defer close(beatDone)
		pr.beat(bctx)
	}()
	pr.stopBeat = func() { stopBeat(); <-beatDone }
	// The follower reads until the runner's trailers, or until it is stopped after a kill or
	// when the session is closed under it.
	fctx, stopFollow := context.WithCancel(ctx)
	pr.dec, pr.stopFollow = &fbDecoder{out: c.Stdout, err: c.Stderr}, stopFollow
	pr.followed = make(chan error, 1)
	go func() { pr.followed <- s.follow(fctx, p.tb, pr.sid, cmdID, pr.dec) }()
	return pr, nil
}

// beat writes the command's heartbeat file every Options.CallerBeat until ctx ends; the
// first one waits a period, so a short command costs no call.
func (pr *fbProc) beat(ctx context.Context) {
	t := time.NewTicker(pr.p.s.b.extra.CallerBeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := pr.p.WriteFile(ctx, pr.prefix+".beat", nil); err != nil && ctx.Err() == nil {
			pr.p.s.b.log.Debug("heartbeat", "session", pr.p.s.name, "err", err)
		}
	}
}

func (pr *fbProc) Wait(ctx context.Context) (int, error) {
	e, err := pr.WaitState(ctx)
	return e.Code, err
}

// WaitState waits for the runner's trailer and keeps the state it carried for ShellState.
// A session closed under the command abandons it, as a killed caller would, without a word
// to the sandbox: it dies when its heartbeat stops (see fbRunner). Otherwise the toolbox
// session is deleted, and a command whose log was lost is killed.
func (pr *fbProc) WaitState(ctx context.Context) (shellwrap.Exit, error) {
	s := pr.p.s
	var err error
	select {
	case err = <-pr.followed:
	case <-s.gone:
		pr.stopFollow()
		<-pr.followed
		err = sandbox.ErrClosed
	case <-ctx.Done(): // the command outlived its kill
		pr.stopFollow()
		err = <-pr.followed
	}
	pr.stopFollow()
	pr.stopBeat()
	if s.isClosed() && err != nil {
		return shellwrap.Exit{}, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: sandbox.ErrClosed}
	}
	if err != nil && ctx.Err() == nil {
		pr.Kill(ctx) // it may still run: it is not left behind
	}
	pr.deleteSession(ctx)
	if err != nil {
		return shellwrap.Exit{}, s.b.apiErr("exec", s.name, err)
	}
	e := shellwrap.Exit{Code: pr.dec.code}
	if pr.dec.trailer {
		if env, err := shellwrap.ParseExports(string(pr.dec.state)); err == nil {
			e.Cwd = env["HERMES_FB_PWD"]
			delete(env, "HERMES_FB_PWD")
			s.setState(fbState{known: true, cwd: e.Cwd, env: env})
		}
		e.NoDir, e.Unsaved = pr.dec.nodir, pr.dec.unsaved && !pr.dec.nodir
	}
	return e, nil
}

// deleteSession deletes the command's toolbox session, even after the caller gave up.
func (pr *fbProc) deleteSession(ctx context.Context) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := pr.p.tb.deleteSession(dctx, pr.sid); err != nil && statusOf(err) != http.StatusNotFound {
		pr.p.s.b.log.Debug("delete toolbox session", "session_id", pr.sid, "err", err)
	}
}

// Kill kills the command's process tree through a second toolbox call.
func (pr *fbProc) Kill(ctx context.Context) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	res, err := pr.p.tb.execute(kctx, "sh -c "+shQuote(fbKill)+" sh "+shQuote(pr.prefix), "", 25*time.Second)
	if err != nil || res.ExitCode != 0 {
		pr.p.s.b.log.Warn("killing a command's processes failed", "session", pr.p.s.name, "err", err, "exit", res.ExitCode,
			"output", res.Result)
	}
}

// ReadFile is not called: Run reads no state back from a StateProcess.
func (p *fbProvider) ReadFile(ctx context.Context, path string) ([]byte, error) {
	home, err := p.s.b.home(ctx, p.tb, p.sb)
	if err != nil {
		return nil, err
	}
	return p.tb.download(ctx, home+"/"+path)
}

// WriteFile uploads data to path, relative to the sandbox user's home.
func (p *fbProvider) WriteFile(ctx context.Context, path string, data []byte) error {
	home, err := p.s.b.home(ctx, p.tb, p.sb)
	if err != nil {
		return err
	}
	return p.tb.upload(ctx, home+"/"+path, data)
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
