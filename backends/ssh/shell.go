package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// killGrace bounds how long a killed command may take to report its end.
const killGrace = 10 * time.Second

// maxIdleShells is how many idle shell channels a session keeps for concurrent commands.
const maxIdleShells = 2

// errShellLost says a shell channel ended in the middle of a command.
var errShellLost = errors.New("connection to the remote shell lost (the next command reconnects)")

// errNotSent marks a command that never reached the shell, so it is safe to send again.
var errNotSent = errors.New("command not sent")

// shellSession is a sandbox.Session over the plain-shell protocol: commands run through
// long-lived remote shells (one per concurrent command, usually one), files and job output
// go through SFTP.
type shellSession struct {
	b    *Backend
	h    *host
	name string

	mu        sync.Mutex
	idle      []*shellChan        // guarded by mu
	busy      map[*shellChan]bool // guarded by mu; shells running a command
	closed    bool                // guarded by mu
	stateDir  string              // guarded by mu; absolute remote path, learned from the first shell
	home      string              // guarded by mu
	cwd       string              // guarded by mu; the session's directory after the last command
	sawState  bool                // guarded by mu; saved state existed, so losing it means the environment was recreated
	recreated bool                // guarded by mu
	wg        sync.WaitGroup      // background kills
	jobMu     sync.Mutex          // held while a job starts, so the job limit holds
}

// shellChan is one remote /bin/sh reading commands.
type shellChan struct {
	sess    *gossh.Session
	release func()
	stdin   io.WriteCloser
	out     *stream
	errs    *stream
	broken  bool
	exited  chan struct{} // closed when the remote shell or its channel ends

	closeOnce sync.Once
}

func (c *shellChan) close() {
	c.closeOnce.Do(func() {
		c.stdin.Close()
		c.sess.Close()
		<-c.exited
		c.release()
	})
}

func (c *shellChan) isExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

func newShellSession(ctx context.Context, b *Backend, h *host, name string) (*shellSession, error) {
	s := &shellSession{b: b, h: h, name: name}
	sc, err := s.startShell(ctx)
	if err != nil {
		return nil, err
	}
	s.idle = append(s.idle, sc)
	if s.cwd == "" {
		s.cwd = s.initialCwd()
		if cl, err := h.sftp(ctx); err == nil {
			if f, err := cl.Open(s.stateDir + "/shell.cwd"); err == nil {
				if b, err := io.ReadAll(io.LimitReader(f, 64<<10)); err == nil && len(b) > 0 {
					s.cwd = string(b)
				}
				f.Close()
			}
		}
	}
	return s, nil
}

// initialCwd is ssh.cwd with ~ resolved against the remote home.
func (s *shellSession) initialCwd() string {
	c := s.b.s.remoteCwd
	switch {
	case c == "~":
		return s.home
	case strings.HasPrefix(c, "~/"):
		return s.home + c[1:]
	}
	return c
}

// startShell opens a channel running /bin/sh, defines the protocol's functions and waits
// for the shell to answer, skipping anything the rc files printed.
func (s *shellSession) startShell(ctx context.Context) (*shellChan, error) {
	sess, release, err := s.h.newSession(ctx)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*shellChan, error) {
		sess.Close()
		release()
		return nil, err
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		return fail(err)
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	stderr, err := sess.StderrPipe()
	if err != nil {
		return fail(err)
	}
	if err := sess.Start("unset SSH_CLIENT SSH2_CLIENT; exec /bin/sh"); err != nil { // as for the helper (exec.go)
		return fail(err)
	}
	sc := &shellChan{sess: sess, release: release, stdin: stdin, out: newStream(stdout), errs: newStream(stderr), exited: make(chan struct{})}
	go func() {
		// Ends when the shell exits or its channel closes (close waits for it).
		_ = sess.Wait()
		close(sc.exited)
	}()
	ta, tb := sandbox.RandomHex(8), sandbox.RandomHex(8)
	tok := []byte(ta + tb)
	// terminal.env_passthrough values arrive over stdin, never on a command line. Like the
	// helper's seed_env, they add names the session does not have: a new session exports them;
	// an existing one gets a line in its saved state that sets each only where it is unset.
	var seed strings.Builder
	pt := s.b.passthrough()
	for _, k := range slices.Sorted(maps.Keys(pt)) {
		line := `[ -n "${` + k + `+x}" ] || export ` + k + "=" + shq(pt[k])
		seed.WriteString(`if [ -f "$__hsd/shell.env" ]; then __l=` + shq(line) +
			`; grep -qxF "$__l" "$__hsd/shell.env" || printf '%s\n' "$__l" >>"$__hsd/shell.env"; else export ` +
			k + "=" + shq(pt[k]) + "; fi\n")
	}
	script := fmt.Sprintf(shellPrologue, stateExpr(s.name), killFuncs) + seed.String() + syncCommand(ta, tb)
	type answer struct {
		fields [][]byte
		err    error
	}
	done := make(chan answer, 2)
	go func() {
		var a answer
		if a.err = sc.out.until(append(tok, 'Y'), nil); a.err == nil {
			for i := 0; i < 3 && a.err == nil; i++ {
				var f []byte
				f, a.err = sc.out.collect(tok)
				a.fields = append(a.fields, f)
			}
			if a.err == nil {
				_, a.err = sc.out.readByte() // newline
			}
		}
		done <- a
	}()
	go func() { done <- answer{err: sc.errs.until(append(append([]byte{}, tok...), 'Y', '\n'), nil)} }()
	if _, err := io.WriteString(stdin, script); err != nil {
		sc.close()
		<-done
		<-done
		return nil, fmt.Errorf("start the remote shell: %w", err)
	}
	var fields [][]byte
	for i := 0; i < 2; i++ {
		select {
		case a := <-done:
			if a.err != nil {
				sc.close()
				if i == 0 {
					<-done
				}
				return nil, fmt.Errorf("start the remote shell: %w", a.err)
			}
			if a.fields != nil {
				fields = a.fields
			}
		case <-ctx.Done():
			sc.close()
			<-done
			if i == 0 {
				<-done
			}
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	s.stateDir, s.home = string(fields[0]), string(fields[1])
	if string(fields[2]) == "1" {
		s.sawState = true
	}
	s.mu.Unlock()
	return sc, nil
}

// getShell returns an idle shell, or starts one.
func (s *shellSession) getShell(ctx context.Context) (*shellChan, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, sandbox.ErrClosed
	}
	for len(s.idle) > 0 {
		n := len(s.idle)
		sc := s.idle[n-1]
		s.idle = s.idle[:n-1]
		if sc.isExited() {
			// Its connection dropped while it was idle.
			s.mu.Unlock()
			sc.close()
			s.mu.Lock()
			continue
		}
		s.markBusy(sc)
		s.mu.Unlock()
		return sc, nil
	}
	s.mu.Unlock()
	sc, err := s.startShell(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		sc.close()
		return nil, sandbox.ErrClosed
	}
	s.markBusy(sc)
	return sc, nil
}

// markBusy records a shell that runs a command; s.mu is held.
func (s *shellSession) markBusy(sc *shellChan) {
	if s.busy == nil {
		s.busy = map[*shellChan]bool{}
	}
	s.busy[sc] = true
}

// putShell returns a shell to the idle list, or closes it.
func (s *shellSession) putShell(sc *shellChan) {
	s.mu.Lock()
	delete(s.busy, sc)
	if !sc.broken && !s.closed && len(s.idle) < maxIdleShells {
		s.idle = append(s.idle, sc)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	sc.close()
}

// Name returns the session name.
func (s *shellSession) Name() string { return s.name }

// Close closes the session's shells; its state stays on the host. A shell running a command
// is closed too, as a killed caller's would be: its end of input makes the shell kill the
// command's tree (see shellPrologue), and the command's Exec returns an error.
func (s *shellSession) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	shells := s.idle
	s.idle = nil
	for sc := range s.busy {
		shells = append(shells, sc)
	}
	s.mu.Unlock()
	for _, sc := range shells {
		sc.close()
	}
	s.wg.Wait()
	s.h.release()
	return nil
}

// Exec runs one command through a shell channel.
func (s *shellSession) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	if cmd.Script == "" && len(cmd.Argv) == 0 {
		return nil, wrap("exec", s.name, fmt.Errorf("empty command: %w", sandbox.ErrInvalidConfig))
	}
	if cmd.Script != "" && len(cmd.Argv) > 0 {
		return nil, wrap("exec", s.name, fmt.Errorf("both script and argv given: %w", sandbox.ErrInvalidConfig))
	}
	start := time.Now()
	spec := s.spec(cmd.Dir, cmd.Env)
	spec.argv = cmd.Argv
	w, err := spec.wrapper()
	if err != nil {
		return nil, wrap("exec", s.name, fmt.Errorf("%w: %w", err, sandbox.ErrInvalidConfig))
	}
	for attempt := 0; ; attempt++ {
		sc, err := s.getShell(ctx)
		if err != nil {
			return nil, wrap("exec", s.name, err)
		}
		res, err := s.run(ctx, sc, cmd, w, start)
		s.putShell(sc)
		if errors.Is(err, errNotSent) && attempt == 0 {
			continue // the shell was gone before the command reached it
		}
		if err != nil && res == nil {
			return nil, wrap("exec", s.name, err)
		}
		return res, err
	}
}

func (s *shellSession) spec(dir string, env map[string]string) wrapperSpec {
	// Absolute: the wrapper may start with an empty environment (env -i) before it restores
	// the saved one.
	s.mu.Lock()
	sd := s.stateDir
	s.mu.Unlock()
	spec := wrapperSpec{stateDir: shq(sd), initialCwd: shellPath(s.b.s.remoteCwd), env: env}
	if dir != "" {
		spec.dir = shellPath(dir)
	}
	return spec
}

type endInfo struct {
	rc, fresh, nodir int
	cwd              string
	err              error
}

// run sends one command and collects its output and end markers.
func (s *shellSession) run(ctx context.Context, sc *shellChan, cmd sandbox.Command, w string, start time.Time) (*sandbox.Result, error) {
	id := sandbox.RandomHex(8)
	ta, tb := sandbox.RandomHex(8), sandbox.RandomHex(8)
	tok := []byte(ta + tb)
	stdinFlag := "0"
	if cmd.Stdin != nil {
		stdinFlag = "1"
	}
	line := "__hr " + id + " " + ta + " " + tb + " " + stdinFlag + " " + shq(cmd.Script) + " " + shq(w) + "\n"
	capture := sandbox.NewCapture(cmd.OutputLimit, filepath.Join(s.b.fo.StateDir, "output")).ForSession(s.name, cmd.SpillLimit)
	stdout, stderr := capture.Tee(cmd.Stdout, cmd.Stderr)
	pidCh := make(chan int, 1)
	outDone := make(chan endInfo, 1)
	errDone := make(chan error, 1)
	go func() {
		var e endInfo
		defer func() { outDone <- e }()
		write := func(p []byte) { stdout.Write(p) }
		for {
			if e.err = sc.out.until(tok, write); e.err != nil {
				return
			}
			var kind byte
			if kind, e.err = sc.out.readByte(); e.err != nil {
				return
			}
			if kind == 'S' {
				var pidLine []byte
				if pidLine, e.err = sc.out.collect([]byte("\n")); e.err != nil {
					return
				}
				pid, _ := strconv.Atoi(string(pidLine))
				pidCh <- pid
				continue
			}
			var body []byte
			if body, e.err = sc.out.collect(tok); e.err != nil {
				return
			}
			if _, e.err = sc.out.readByte(); e.err != nil {
				return
			}
			parts := strings.SplitN(string(body), " ", 4)
			for len(parts) < 4 {
				parts = append(parts, "")
			}
			e.rc, _ = strconv.Atoi(parts[0])
			e.fresh, _ = strconv.Atoi(parts[1])
			e.nodir, _ = strconv.Atoi(parts[2])
			e.cwd = parts[3]
			return
		}
	}()
	go func() {
		err := sc.errs.until(append(append([]byte{}, tok...), 'E', '\n'), func(p []byte) { stderr.Write(p) })
		errDone <- err
	}()
	if _, err := io.WriteString(sc.stdin, line); err != nil {
		sc.broken = true
		sc.close()
		<-outDone
		<-errDone
		return nil, fmt.Errorf("%w: %w: %v", errShellLost, errNotSent, err)
	}

	var timeout <-chan time.Time
	if cmd.Timeout > 0 {
		t := time.NewTimer(cmd.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var feeder *gossh.Session
	var feederRelease func()
	closeFeeder := func() {
		if feeder != nil {
			feeder.Close()
			feederRelease()
			feeder = nil
		}
	}
	defer closeFeeder()
	pid := 0
	reason := ""
	var feederErr error
	var end endInfo
	var errErr error
	outOK, errOK := false, false
	ctxDone := ctx.Done()
	var graceC <-chan time.Time
	for !(outOK && errOK) {
		select {
		case pid = <-pidCh:
			switch {
			case reason != "":
				s.kill(pid)
			case cmd.Stdin != nil:
				f, rel, err := s.startFeeder(ctx, id, cmd.Stdin)
				if err != nil {
					// The command waits for its input forever without a feeder: end it.
					feederErr = err
					reason = "interrupt"
					s.kill(pid)
					graceC = time.After(killGrace)
				} else {
					feeder, feederRelease = f, rel
				}
			}
		case end = <-outDone:
			outOK = true
		case errErr = <-errDone:
			errOK = true
		case <-timeout:
			timeout = nil
			if reason == "" {
				reason = "timeout"
				if pid != 0 {
					s.kill(pid)
				}
				graceC = time.After(killGrace)
			}
		case <-ctxDone:
			ctxDone = nil
			if reason == "" {
				reason = "interrupt"
				if pid != 0 {
					s.kill(pid)
				}
				graceC = time.After(killGrace)
			}
		case <-graceC:
			sc.broken = true
			sc.close() // ends both readers
			if !outOK {
				<-outDone
			}
			if !errOK {
				<-errDone
			}
			return nil, fmt.Errorf("the remote command did not end within %s of being killed: %w", killGrace, errShellLost)
		}
	}
	if end.err != nil || errErr != nil {
		sc.broken = true
		sc.close()
		return nil, fmt.Errorf("%w: %v", errShellLost, errors.Join(end.err, errErr))
	}
	res := &sandbox.Result{ExitCode: end.rc, Duration: time.Since(start)}
	switch reason {
	case "timeout":
		res.ExitCode, res.TimedOut = sandbox.ExitTimeout, true
	case "interrupt":
		res.ExitCode, res.Interrupted = sandbox.ExitInterrupted, true
	}
	s.mu.Lock()
	if end.cwd != "" {
		s.cwd = end.cwd
	}
	res.Cwd = s.cwd
	if end.fresh == 1 && s.sawState {
		s.recreated = true
	}
	if end.cwd != "" {
		s.sawState = true
	}
	res.EnvironmentRecreated = s.recreated
	s.recreated = false
	s.mu.Unlock()
	if end.cwd == "" && len(cmd.Argv) == 0 && reason == "" && end.nodir == 0 {
		// A script's save leaves the directory it ended in; without it, nothing was saved.
		res.StateNotSaved = true
		res.StateError = "the shell could not write them to the session's state directory (is the disk full?), or the script left through exec or through exit with its own EXIT trap"
	}
	if err := capture.Finish(res); err != nil {
		s.b.log.Warn("output spill failed", "err", err)
	}
	if feederErr != nil {
		return nil, fmt.Errorf("pass stdin to the command: %w", feederErr)
	}
	if end.nodir == 1 {
		return nil, fmt.Errorf("working directory %s: no such directory: %w", cmd.Dir, sandbox.ErrNotFound)
	}
	if reason == "interrupt" && ctx.Err() != nil {
		return res, fmt.Errorf("exec interrupted: %w", ctx.Err())
	}
	return res, nil
}

// startFeeder streams r into the command's stdin FIFO over a second channel.
func (s *shellSession) startFeeder(ctx context.Context, id string, r io.Reader) (*gossh.Session, func(), error) {
	sess, release, err := s.h.newSession(ctx)
	if err != nil {
		return nil, nil, err
	}
	sess.Stdin = r
	fifo := stateExpr(s.name) + "/run-" + id + ".in"
	if err := sess.Start("[ -p " + fifo + " ] && exec cat > " + fifo); err != nil {
		sess.Close()
		release()
		return nil, nil, err
	}
	return sess, release, nil
}

// kill kills pid's process tree from a separate channel, in the background.
func (s *shellSession) kill(pid int) {
	if pid <= 1 {
		return
	}
	// Added under mu, so that Close's Wait never races an Add; once the session is closed
	// its shells are gone, and each shell's watcher kills its own command (shellPrologue).
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), killGrace)
		defer cancel()
		if err := s.h.killTree(ctx, pid); err != nil {
			s.b.log.Warn("kill remote command", "pid", pid, "err", err)
		}
	}()
}

// killTree kills pid's process tree on the host.
func (h *host) killTree(ctx context.Context, pid int) error {
	_, errOut, code, err := h.run(ctx, "exec /bin/sh", strings.NewReader(killFuncs+"__hk "+strconv.Itoa(pid)+"\n"))
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, oneLine(errOut, 200))
	}
	return err
}

// jobStart runs the job's wrapper detached and returns its pid and start time.
func (s *shellSession) jobStart(ctx context.Context, jobDir, script, w string) (int, uint64, error) {
	sc, err := s.getShell(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer s.putShell(sc)
	ta, tb := sandbox.RandomHex(8), sandbox.RandomHex(8)
	tok := []byte(ta + tb)
	type reply struct {
		body []byte
		err  error
	}
	outC := make(chan reply, 1)
	errC := make(chan error, 1)
	go func() {
		var r reply
		if r.err = sc.out.until(append(append([]byte{}, tok...), 'J'), nil); r.err == nil {
			r.body, r.err = sc.out.collect(tok)
			if r.err == nil {
				_, r.err = sc.out.readByte()
			}
		}
		outC <- r
	}()
	go func() { errC <- sc.errs.until(append(append([]byte{}, tok...), 'E', '\n'), nil) }()
	line := "__hj " + shq(jobDir) + " " + ta + " " + tb + " " + shq(script) + " " + shq(w) + "\n"
	if _, err := io.WriteString(sc.stdin, line); err != nil {
		sc.broken = true
		sc.close()
		<-outC
		<-errC
		return 0, 0, fmt.Errorf("%w: %v", errShellLost, err)
	}
	var r reply
	var errErr error
	gotOut, gotErr := false, false
	ctxDone := ctx.Done()
	for !(gotOut && gotErr) {
		select {
		case r = <-outC:
			gotOut = true
		case errErr = <-errC:
			gotErr = true
		case <-ctxDone:
			// Closing the channel ends both readers.
			ctxDone = nil
			sc.broken = true
			sc.close()
		}
	}
	if ctx.Err() != nil {
		return 0, 0, ctx.Err()
	}
	if r.err != nil || errErr != nil {
		sc.broken = true
		sc.close()
		return 0, 0, fmt.Errorf("%w: %v", errShellLost, errors.Join(r.err, errErr))
	}
	f := strings.Fields(string(bytes.TrimSpace(r.body)))
	if len(f) != 2 || f[0] == "0" {
		return 0, 0, fmt.Errorf("start job: the remote shell could not write %s", jobDir)
	}
	pid, _ := strconv.Atoi(f[0])
	ticks, _ := strconv.ParseUint(f[1], 10, 64)
	return pid, ticks, nil
}

var _ sandbox.Session = (*shellSession)(nil)
