// Package channel implements sandbox.Session on top of the in-sandbox helper (internal/agent):
// one persistent stream per session carries every command, job and file operation. Backends
// only say how to start the helper (a pipe, a docker exec, an SSH channel) and whether the
// sandbox had to be recreated to do so.
package channel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Started is a running helper.
type Started struct {
	Client *agent.Client
	// Recreated says the sandbox itself was lost and made anew, so earlier state is gone.
	Recreated bool
}

// Starter starts (or reconnects to) the session's helper. It is called lazily, and again
// after the stream to the helper is lost.
type Starter func(ctx context.Context) (Started, error)

// Options configure a Session.
type Options struct {
	Backend  string
	Name     string
	Start    Starter
	SpillDir string
	Logger   *slog.Logger
	// MapError turns a helper failure into a backend error (optional).
	MapError func(op string, err error) error
	// OnClose runs when the session is closed (optional).
	OnClose func() error
	// Detach, if set, is offered the live helper client when the session closes: when it
	// returns true the backend has taken the client back (a warm pool's container reused
	// after a reset) and the session does not close it.
	Detach func(*agent.Client) bool
	// Passthrough is the caller's current values of terminal.env_passthrough (NAME to VALUE).
	// Every command, job and terminal gets them as per-command variables, so a value the
	// caller rotated reaches the next call even though the session's saved environment still
	// holds the first one; a variable the command itself names in Env is left as given.
	Passthrough map[string]string
}

// Session is a sandbox.Session backed by a helper stream.
type Session struct {
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	client    *agent.Client // guarded by mu
	recreated bool          // guarded by mu; not yet reported in a result
	closed    bool          // guarded by mu
	// starting is closed when the start in progress ends (nil: none). The start runs without
	// mu, so Close and other calls never wait behind a container create or an upload; callers
	// that need the helper wait for it, or for their own context.
	starting    chan struct{}      // guarded by mu
	cancelStart context.CancelFunc // guarded by mu
}

// New returns a session; nothing starts until the first use.
func New(opts Options) *Session {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Session{opts: opts, log: log.With("backend", opts.Backend, "session", opts.Name)}
}

// Name returns the session name.
func (s *Session) Name() string { return s.opts.Name }

// Client returns a live helper client, starting one if needed. One start runs at a time;
// other callers wait for it.
func (s *Session) Client(ctx context.Context) (*agent.Client, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, s.wrap("exec", sandbox.ErrClosed)
		}
		if s.client != nil {
			select {
			case <-s.client.Done():
				s.log.Debug("helper stream lost; restarting", "err", s.client.Err())
				go s.client.Close()
				s.client = nil
			default:
				c := s.client
				s.mu.Unlock()
				return c, nil
			}
		}
		if ch := s.starting; ch != nil {
			s.mu.Unlock()
			select {
			case <-ch:
				continue // started (or failed: then this caller tries)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		sctx, cancel := context.WithCancel(ctx)
		s.starting, s.cancelStart = ch, cancel
		s.mu.Unlock()

		st, err := s.opts.Start(sctx)

		s.mu.Lock()
		cancel()
		closed := s.closed
		if err == nil && !closed {
			s.client = st.Client
			s.recreated = s.recreated || st.Recreated
		}
		s.mu.Unlock()
		if err == nil && closed {
			st.Client.Close() // before Close, waiting on ch, runs OnClose
		}
		s.mu.Lock()
		s.starting, s.cancelStart = nil, nil
		close(ch)
		s.mu.Unlock()
		switch {
		case err != nil:
			return nil, err
		case closed:
			return nil, s.wrap("exec", sandbox.ErrClosed)
		}
		return st.Client, nil
	}
}

// takeRecreated reports (once) that the sandbox was recreated.
func (s *Session) takeRecreated() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recreated
	s.recreated = false
	return r
}

func (s *Session) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if s.opts.MapError != nil {
		return s.opts.MapError(op, err)
	}
	var re *agent.RemoteError
	if errors.As(err, &re) {
		switch re.Kind {
		case agent.KindNotFound:
			err = sandbox.WithKind(sandbox.ErrNotFound, re)
		case agent.KindInvalid:
			err = sandbox.WithKind(sandbox.ErrInvalidConfig, re)
		case agent.KindPermission:
			err = sandbox.WithKind(fs.ErrPermission, re)
		case agent.KindUnsupported:
			err = sandbox.WithKind(sandbox.ErrUnsupported, re)
		case agent.KindLimit:
			err = sandbox.WithKind(sandbox.ErrLimit, re)
		}
	}
	var se *sandbox.Error
	if errors.As(err, &se) {
		return err
	}
	return &sandbox.Error{Backend: s.opts.Backend, Op: op, ID: s.opts.Name, Err: err}
}

// Exec runs cmd. On cancellation it returns the partial result (exit 130) together with an
// error wrapping ctx.Err(); the process tree inside the sandbox is already gone by then.
func (s *Session) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	if cmd.Script == "" && len(cmd.Argv) == 0 {
		return nil, s.wrap("exec", fmt.Errorf("empty command: %w", sandbox.ErrInvalidConfig))
	}
	start := time.Now()
	client, err := s.Client(ctx)
	if err != nil {
		return nil, s.wrap("exec", err)
	}
	capture := sandbox.NewCapture(cmd.OutputLimit, s.opts.SpillDir).ForSession(s.opts.Name, cmd.SpillLimit)
	stdout, stderr := capture.Tee(cmd.Stdout, cmd.Stderr)
	req := agent.RunRequest{Script: agent.Bytes(cmd.Script), Argv: agent.BytesSlice(cmd.Argv), Dir: cmd.Dir, Env: agent.BytesMap(s.withPassthrough(cmd.Env)),
		TimeoutMS: cmd.Timeout.Milliseconds()}
	if cmd.Timeout > 0 && req.TimeoutMS == 0 {
		req.TimeoutMS = 1
	}
	ex, err := client.Run(ctx, req, cmd.Stdin, stdout, stderr)
	if errors.Is(err, agent.ErrNotSent) {
		// The stream was already dead and nothing ran: start a new helper and try once more.
		s.drop(client)
		if client, err = s.Client(ctx); err != nil {
			return nil, s.wrap("exec", err)
		}
		ex, err = client.Run(ctx, req, cmd.Stdin, stdout, stderr)
	}
	if err != nil {
		if errors.Is(err, agent.ErrConnLost) {
			return nil, s.wrap("exec", fmt.Errorf("%w (the sandbox may have stopped; the next command starts a new helper)", err))
		}
		return nil, s.wrap("exec", err)
	}
	res := &sandbox.Result{ExitCode: ex.Code, Cwd: ex.Cwd, Duration: time.Since(start),
		TimedOut: ex.TimedOut, Interrupted: ex.Interrupted, EnvironmentRecreated: s.takeRecreated(),
		StateNotSaved: ex.StateError != "", StateError: ex.StateError}
	if err := capture.Finish(res); err != nil {
		s.log.Warn("output spill failed", "err", err)
	}
	if ex.Interrupted && ctx.Err() != nil {
		return res, fmt.Errorf("exec interrupted: %w", ctx.Err())
	}
	return res, nil
}

// withPassthrough returns env with the caller's passthrough values added (see
// Options.Passthrough); env's own entries win.
func (s *Session) withPassthrough(env map[string]string) map[string]string {
	if len(s.opts.Passthrough) == 0 {
		return env
	}
	out := make(map[string]string, len(env)+len(s.opts.Passthrough))
	maps.Copy(out, s.opts.Passthrough)
	maps.Copy(out, env)
	return out
}

// Close detaches from the helper; the sandbox stays.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.client
	s.client = nil
	starting := s.starting
	if s.cancelStart != nil {
		s.cancelStart()
	}
	s.mu.Unlock()
	if starting != nil {
		// A start cut short still ends what it began (a container create finishes): wait,
		// so that OnClose runs after it and what it started is not left behind.
		<-starting
	}
	var err error
	if c != nil && (s.opts.Detach == nil || !s.opts.Detach(c)) {
		err = c.Close()
	}
	if s.opts.OnClose != nil {
		err = errors.Join(err, s.opts.OnClose())
	}
	return err
}

// call runs a helper call with the session's error mapping.
func (s *Session) call(ctx context.Context, op string, req agent.CallRequest, out any, data io.Writer, upload io.Reader) error {
	return s.with(ctx, op, upload == nil, func(c *agent.Client) error { return c.Call(ctx, req, out, data, upload) })
}

// with runs fn on a live helper client with the session's error mapping; when retry is set
// and the request never reached a dead stream, once more on a new helper.
func (s *Session) with(ctx context.Context, op string, retry bool, fn func(*agent.Client) error) error {
	client, err := s.Client(ctx)
	if err != nil {
		return s.wrap(op, err)
	}
	err = fn(client)
	if errors.Is(err, agent.ErrNotSent) && retry {
		s.drop(client)
		if client, err = s.Client(ctx); err != nil {
			return s.wrap(op, err)
		}
		err = fn(client)
	}
	return s.wrap(op, err)
}

// drop forgets a client whose stream is dead, so the next use starts a new helper.
func (s *Session) drop(c *agent.Client) {
	s.mu.Lock()
	if s.client == c {
		s.client = nil
	}
	s.mu.Unlock()
	c.Close()
}

// ReadFile reads up to limit bytes (0 = all) from offset.
func (s *Session) ReadFile(ctx context.Context, p string, offset, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	var rep agent.ReadReply
	if err := s.call(ctx, "read "+p, agent.CallRequest{Op: "read_file", Path: p, Offset: offset, Limit: limit}, &rep, &buf, nil); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ShellState returns the session's working directory and exported environment as the helper
// keeps them between commands (the gate classifies each command in this state).
func (s *Session) ShellState(ctx context.Context) (string, map[string]string, error) {
	var st struct {
		Cwd agent.Bytes            `json:"cwd"`
		Env map[string]agent.Bytes `json:"env"`
	}
	if err := s.call(ctx, "state", agent.CallRequest{Op: "state"}, &st, nil, nil); err != nil {
		return "", nil, err
	}
	env := make(map[string]string, len(st.Env))
	for k, v := range st.Env {
		env[k] = string(v)
	}
	return string(st.Cwd), env, nil
}

// WriteFile writes data to p atomically, creating parent directories.
func (s *Session) WriteFile(ctx context.Context, p string, data []byte, mode uint32) error {
	return s.call(ctx, "write "+p, agent.CallRequest{Op: "write_file", Path: p, Mode: mode}, nil, nil, bytes.NewReader(data))
}

// ResolvePath returns the file p names in the sandbox: p as the helper's file calls would
// open it, with symbolic links followed as far as it exists (sandbox.PathResolver). A helper
// too old to say fails with an error matching sandbox.ErrUnsupported and agent.ErrNoResolve.
func (s *Session) ResolvePath(ctx context.Context, p string) (string, error) {
	var out string
	err := s.with(ctx, "resolve "+p, true, func(c *agent.Client) error {
		r, err := c.ResolvePath(ctx, p)
		if errors.Is(err, agent.ErrNoResolve) {
			return sandbox.WithKind(sandbox.ErrUnsupported, err)
		}
		out = r
		return err
	})
	return out, err
}

// ListDir lists a directory.
func (s *Session) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	var entries []agent.FileEntry
	if err := s.call(ctx, "list "+p, agent.CallRequest{Op: "list_dir", Path: p}, &entries, nil, nil); err != nil {
		return nil, err
	}
	out := make([]sandbox.FileInfo, len(entries))
	for i, e := range entries {
		out[i] = sandbox.FileInfo{Name: e.Name, Size: e.Size, Mode: e.Mode, IsDir: e.IsDir, ModTime: e.ModTime}
	}
	return out, nil
}

func jobStatus(j agent.JobInfo) sandbox.JobStatus {
	return sandbox.JobStatus{ID: j.ID, Command: j.Command, Running: j.Running, ExitCode: j.ExitCode, Started: j.Started, PID: j.PID}
}

func jobOutput(r agent.JobOutputReply) sandbox.JobOutput {
	return sandbox.JobOutput{JobStatus: jobStatus(r.JobInfo), Stdout: string(r.Stdout), Stderr: string(r.Stderr), Truncated: r.Truncated}
}

// StartJob starts a background job.
func (s *Session) StartJob(ctx context.Context, cmd sandbox.Command) (sandbox.JobStatus, error) {
	if cmd.Script == "" && len(cmd.Argv) == 0 {
		return sandbox.JobStatus{}, s.wrap("job start", fmt.Errorf("empty command: %w", sandbox.ErrInvalidConfig))
	}
	var info agent.JobInfo
	timeout, maxJobs := cmd.JobTimeout, cmd.MaxJobs
	if timeout <= 0 {
		timeout = sandbox.DefaultJobTimeout
	}
	if maxJobs <= 0 {
		maxJobs = sandbox.DefaultMaxJobs
	}
	req := agent.CallRequest{Op: "job_start", MaxJobs: maxJobs, Run: &agent.RunRequest{Script: agent.Bytes(cmd.Script), Argv: agent.BytesSlice(cmd.Argv), Dir: cmd.Dir, Env: agent.BytesMap(s.withPassthrough(cmd.Env)),
		TimeoutMS: max(timeout.Milliseconds(), 1)}}
	if err := s.call(ctx, "job start", req, &info, nil, nil); err != nil {
		return sandbox.JobStatus{}, err
	}
	return jobStatus(info), nil
}

// Jobs lists background jobs.
func (s *Session) Jobs(ctx context.Context) ([]sandbox.JobStatus, error) {
	var infos []agent.JobInfo
	if err := s.call(ctx, "job list", agent.CallRequest{Op: "job_list"}, &infos, nil, nil); err != nil {
		return nil, err
	}
	out := make([]sandbox.JobStatus, len(infos))
	for i, j := range infos {
		out[i] = jobStatus(j)
	}
	return out, nil
}

// PollJob returns a job's new output.
func (s *Session) PollJob(ctx context.Context, id string) (sandbox.JobOutput, error) {
	var r agent.JobOutputReply
	if err := s.call(ctx, "job poll", agent.CallRequest{Op: "job_poll", JobID: id}, &r, nil, nil); err != nil {
		return sandbox.JobOutput{}, err
	}
	return jobOutput(r), nil
}

// WaitJob waits for a job to end, or for ctx.
func (s *Session) WaitJob(ctx context.Context, id string) (sandbox.JobOutput, error) {
	req := agent.CallRequest{Op: "job_wait", JobID: id}
	if dl, ok := ctx.Deadline(); ok {
		req.WaitMS = max(time.Until(dl).Milliseconds()-50, 1)
	}
	var r agent.JobOutputReply
	if err := s.call(ctx, "job wait", req, &r, nil, nil); err != nil {
		return sandbox.JobOutput{}, err
	}
	return jobOutput(r), nil
}

// KillJob kills a job's whole process tree.
func (s *Session) KillJob(ctx context.Context, id string) (sandbox.JobStatus, error) {
	var info agent.JobInfo
	if err := s.call(ctx, "job kill", agent.CallRequest{Op: "job_kill", JobID: id}, &info, nil, nil); err != nil {
		return sandbox.JobStatus{}, err
	}
	return jobStatus(info), nil
}

var (
	_ sandbox.Session      = (*Session)(nil)
	_ sandbox.JobRunner    = (*Session)(nil)
	_ sandbox.FileSystem   = (*Session)(nil)
	_ sandbox.PathResolver = (*Session)(nil)
)

// Shell runs an interactive shell on a pseudo-terminal inside the sandbox.
func (s *Session) Shell(ctx context.Context, opts sandbox.TerminalOptions) (int, error) {
	client, err := s.Client(ctx)
	if err != nil {
		return 0, s.wrap("shell", err)
	}
	var resize chan agent.WinSize
	if opts.Resize != nil {
		resize = make(chan agent.WinSize)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			defer close(resize)
			for {
				select {
				case ws, ok := <-opts.Resize:
					if !ok {
						return
					}
					select {
					case resize <- agent.WinSize{Rows: ws.Rows, Cols: ws.Cols}:
					case <-stop:
						return
					}
				case <-stop:
					return
				}
			}
		}()
	}
	ex, err := client.RunTTY(ctx, agent.RunRequest{Env: agent.BytesMap(s.withPassthrough(opts.Env)), Rows: opts.Size.Rows, Cols: opts.Size.Cols}, opts.Stdin, opts.Stdout, resize)
	if err != nil {
		return 0, s.wrap("shell", err)
	}
	return ex.Code, nil
}

var _ sandbox.Terminal = (*Session)(nil)
