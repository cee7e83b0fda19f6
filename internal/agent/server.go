//go:build unix

package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a helper.
type Options struct {
	// StateDir holds the session's state file, job directories and scratch files. It is
	// created 0700.
	StateDir string
	// Shell is the shell that runs scripts: a path, or "" / "auto" for bash when present,
	// else sh.
	Shell string
	// Env is the environment a fresh session starts with (default: the helper's own).
	Env []string
	// Cwd is where a fresh session starts (default: $HOME, else the helper's directory).
	Cwd string
	// Confine, if set, is enforced on every command the helper starts.
	Confine *Confinement
	// Guard makes each foreground command die with this process, however it ends (even
	// SIGKILL): one small guard process per server is told of each command's process group
	// and kills the groups still running once the pipe this process holds closes. For a server in the caller's own process (the
	// local backend); a helper in a sandbox is ended, and ends its commands, with its stream.
	Guard bool
	// OnSilence, if set, is called when a client with a heartbeat went silent, after its
	// foreground commands were killed (the helper process exits: a read of its stdin, a PTY,
	// cannot be cut short).
	OnSilence func()
}

// Server is the helper: it serves one client stream.
type Server struct {
	opts  Options
	shell string
	out   *frameWriter
	state *sessionState

	conf       *confiner // nil: commands start unconfined
	confStatus ConfinementStatus

	mu     sync.Mutex
	jobMu  sync.Mutex               // held while a job starts, so the job limit holds
	runs   map[uint32]*run          // guarded by mu
	writes map[uint32]*pendingWrite // guarded by mu
	wg     sync.WaitGroup
	guard  guard // Options.Guard
	resets resetState
}

// NewServer prepares a helper; it loads saved state but starts nothing.
func NewServer(opts Options) (*Server, error) {
	if opts.StateDir == "" {
		return nil, errors.New("agent: no state directory")
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: create state directory: %w", err)
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	shell, err := findShell(opts.Shell, opts.Env)
	if err != nil {
		return nil, err
	}
	st, err := loadState(opts.StateDir, opts.Env, opts.Cwd)
	if err != nil {
		return nil, err
	}
	srv := &Server{opts: opts, shell: shell, state: st, runs: map[uint32]*run{}, writes: map[uint32]*pendingWrite{},
		confStatus: ConfinementStatus{Detail: "not confined"}}
	if opts.Confine != nil {
		for _, d := range []string{srv.scratchDir(), srv.jobsDir()} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return nil, err
			}
		}
		cf, err := newConfiner(*opts.Confine, []string{srv.scratchDir(), srv.jobsDir()})
		switch {
		case err == nil:
			srv.conf, srv.confStatus = cf, cf.status
		case opts.Confine.Required:
			return nil, fmt.Errorf("agent: confine commands: %w", err)
		default:
			srv.confStatus = ConfinementStatus{Detail: "not kernel-enforced (" + err.Error() + "); only the gate's path checks apply"}
		}
	}
	return srv, nil
}

// Confinement says whether the commands this helper starts are confined by the kernel.
func (s *Server) Confinement() ConfinementStatus { return s.confStatus }

// scratchDir holds the files a command's shell writes for the helper (its exit state, a long
// script): the one place under the state directory that a confined command may write.
func (s *Server) scratchDir() string { return filepath.Join(s.opts.StateDir, "run") }

// startProcess starts a command, on the confined thread when there is one.
func (s *Server) startProcess(fn func()) {
	if s.conf != nil {
		s.conf.start(fn)
		return
	}
	fn()
}

func findShell(want string, env []string) (string, error) {
	switch want {
	case "", "auto":
		for _, p := range []string{"/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh"} {
			if isExecutable(p) {
				return p, nil
			}
		}
		return "", errors.New("agent: no shell found (looked for bash and sh in /bin and /usr/bin)")
	case "bash", "sh":
		if p, err := lookPath(want, envGet(env, "PATH"), "/"); err == nil {
			return p, nil
		}
		return "", fmt.Errorf("agent: shell %q not found in PATH", want)
	}
	if !isExecutable(want) {
		return "", fmt.Errorf("agent: shell %q is not an executable file", want)
	}
	return want, nil
}

// Serve speaks the protocol on r and w until r ends. When the client goes away, every
// foreground command it started is killed with its whole process tree; background jobs stay.
func (s *Server) Serve(r io.Reader, w io.Writer) error {
	s.out = newFrameWriter(w)
	if err := s.out.writeRaw(frameMagic); err != nil {
		return err
	}
	home := envGet(s.state.envList(), "HOME")
	hello := Hello{Version: Version, PID: os.Getpid(), Arch: runtime.GOARCH, Shell: s.shell,
		StateDir: s.opts.StateDir, Home: home, Fresh: s.state.fresh, Beats: true}
	if err := s.send(tHello, 0, hello); err != nil {
		return err
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		err    error
		heard  atomic.Int64 // unix nanoseconds of the last frame
		silent atomic.Bool
		armed  sync.Once
	)
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	for {
		var f frame
		f, err = readFrame(br)
		if err != nil {
			break
		}
		heard.Store(time.Now().UnixNano())
		if f.typ == tBeat {
			var b Beat
			if json.Unmarshal(f.payload, &b) == nil && b.TimeoutMS > 0 {
				armed.Do(func() {
					go s.watchBeats(time.Duration(b.TimeoutMS)*time.Millisecond, &heard, &silent, r, stopWatch)
				})
			}
			continue
		}
		s.dispatch(f)
	}
	if silent.Load() {
		err = errSilent
	}
	s.killRuns()
	s.mu.Lock()
	for id, pw := range s.writes {
		pw.abort()
		delete(s.writes, id)
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.guard.close()
	if s.conf != nil {
		s.conf.close()
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// killRuns kills the foreground commands: their client is gone.
func (s *Server) killRuns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rn := range s.runs {
		rn.kill(reasonInterrupt)
	}
}

// errSilent: the client sent nothing for longer than its heartbeat's timeout.
var errSilent = errors.New("the client went silent (no heartbeat): taken to be gone; its foreground commands were killed")

// watchBeats takes the client to be gone once nothing has been heard for timeout: it kills
// the foreground commands, as the end of the stream does, and ends the stream (closing r,
// where a read on it can be cut short; then Options.OnSilence, which the helper process sets
// to exit).
func (s *Server) watchBeats(timeout time.Duration, heard *atomic.Int64, silent *atomic.Bool, r io.Reader, stop <-chan struct{}) {
	tick := time.NewTicker(min(timeout/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if time.Since(time.Unix(0, heard.Load())) < timeout {
			continue
		}
		silent.Store(true)
		s.killRuns()
		if c, ok := r.(io.Closer); ok {
			c.Close()
		}
		if s.opts.OnSilence != nil {
			// The killed commands are reaped first (a few milliseconds).
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				s.mu.Lock()
				n := len(s.runs)
				s.mu.Unlock()
				if n == 0 {
					break
				}
			}
			s.opts.OnSilence()
		}
		return
	}
}

func (s *Server) dispatch(f frame) {
	switch f.typ {
	case tRun:
		var req RunRequest
		if err := json.Unmarshal(f.payload, &req); err != nil {
			s.sendErr(f.id, KindInvalid, "bad run request: "+err.Error())
			return
		}
		if req.TTY {
			s.startTTY(f.id, req)
			return
		}
		s.startRun(f.id, req)
	case tStdin, tEOF:
		s.mu.Lock()
		rn, pw := s.runs[f.id], s.writes[f.id]
		s.mu.Unlock()
		switch {
		case rn != nil:
			rn.stdinFrame(f)
		case pw != nil:
			s.writeFrame(f, pw)
		}
	case tData:
		s.mu.Lock()
		pw := s.writes[f.id]
		s.mu.Unlock()
		if pw != nil {
			s.writeFrame(f, pw)
		}
	case tSignal:
		var req SignalRequest
		_ = json.Unmarshal(f.payload, &req)
		s.mu.Lock()
		rn := s.runs[f.id]
		s.mu.Unlock()
		switch {
		case rn == nil:
		case req.Reason == reasonResize:
			rn.resize(req.Rows, req.Cols)
		default:
			rn.kill(req.Reason)
		}
	case tCall:
		var req CallRequest
		if err := json.Unmarshal(f.payload, &req); err != nil {
			s.sendErr(f.id, KindInvalid, "bad call: "+err.Error())
			return
		}
		s.call(f.id, req)
	default:
		s.sendErr(f.id, KindInvalid, fmt.Sprintf("unknown frame type %q", f.typ))
	}
}

func (s *Server) send(typ frameType, id uint32, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.out.write(typ, id, b)
}

func (s *Server) sendErr(id uint32, kind ErrorKind, msg string) {
	_ = s.send(tError, id, RemoteError{Kind: kind, Message: msg})
}

func (s *Server) sendErrFrom(id uint32, err error) {
	kind := KindIO
	switch {
	case errors.Is(err, os.ErrNotExist):
		kind = KindNotFound
	case errors.Is(err, os.ErrExist):
		kind = KindExists
	case errors.Is(err, os.ErrPermission):
		kind = KindPermission
	case errors.Is(err, errInvalid):
		kind = KindInvalid
	case errors.Is(err, errLimit):
		kind = KindLimit
	}
	s.sendErr(id, kind, err.Error())
}

var errInvalid = errors.New("invalid request")

var errLimit = errors.New("limit reached")

// go runs fn in a goroutine that Serve waits for.
func (s *Server) goTracked(fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

// resolve makes p absolute against the session's working directory and expands a leading ~.
func (s *Server) resolve(p string) string {
	cwd, env := s.state.snapshot()
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = envGet(env, "HOME") + p[1:]
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(cwd, p)
	}
	return filepath.Clean(p)
}
