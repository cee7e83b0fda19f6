package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// session is a channel session (commands, jobs, files and the terminal over the helper
// stream) plus what only docker knows: which container it lives in, when it was last used,
// and whether a killed command ran out of memory.
type session struct {
	*channel.Session
	b    *Backend
	name string
	// ephemeral: the session's sandbox is its own, disposed of when it closes (recycle.go)
	ephemeral bool

	mu          sync.Mutex
	containerID string     // guarded by mu; the container this process last used for the session
	oomCount    int64      // guarded by mu; the cgroup's OOM kill count when last looked at
	lastCwd     string     // guarded by mu; the working directory last written to the session's record
	relay       *relay     // guarded by mu; the egress relay and proxy (docker.network allowlist)
	stale       []string   // guarded by mu; current settings the session's container does not use
	member      *poolEntry // guarded by mu; the pool member an ephemeral session took as it is
	pool        *pool      // guarded by mu; the pool member came from
	given       bool       // guarded by mu; the member (or the sandbox) was handed back
}

// start is the channel's Starter: it makes sure the session's container runs and attaches
// a helper to it.
func (s *session) start(ctx context.Context) (channel.Started, error) {
	b := s.b
	if b.isClosed() {
		return channel.Started{}, &sandbox.Error{Backend: Name, Op: "start", ID: s.name, Err: sandbox.ErrClosed}
	}
	if err := b.prepare(ctx); err != nil {
		return channel.Started{}, err
	}
	if s.ephemeral {
		if st, ok, err := s.startMember(ctx); ok {
			return st, err
		}
	}
	s.mu.Lock()
	known := s.containerID
	s.mu.Unlock()
	var t target
	var client *agent.Client
	var err error
	recreated := false
	for attempt := 0; ; attempt++ {
		if t, err = b.ensure(ctx, s.name, known); err != nil {
			return channel.Started{}, err
		}
		if s.ephemeral {
			b.noteEphemeral(t.id, s.name)
		}
		recreated = recreated || t.recreated
		if client = t.client; client != nil {
			break
		}
		if client, err = b.startHelper(ctx, t.id, b.containerName(s.name)); err == nil {
			break
		}
		// A container that stopped (or is stopping) between the check and the exec is
		// started again; a helper that fails in a container that stays up is a real error.
		if attempt == 2 || ctx.Err() != nil || !b.goneDown(ctx, t.id, err) {
			return channel.Started{}, err
		}
		known = t.id
	}
	t.recreated = recreated
	if err := s.startEgress(ctx, t.id); err != nil {
		client.Close()
		return channel.Started{}, err
	}
	var n int64 // a fresh container's cgroup has killed nothing yet
	if !t.fresh {
		n, _ = b.readOOMCount(ctx, client)
	}
	s.mu.Lock()
	s.containerID = t.id
	s.oomCount = n
	s.stale = t.stale
	s.mu.Unlock()
	if len(t.stale) > 0 {
		b.log.Info("session keeps its container, made from other settings", "session", s.name, "settings", t.stale)
	}
	if t.recreated {
		b.log.Info("session's sandbox was recreated; earlier state is gone", "session", s.name)
	}
	return channel.Started{Client: client, Recreated: t.recreated}, nil
}

// Exec runs cmd in the session's container. A command killed by the kernel for lack of
// memory gets a message saying so on its stderr.
func (s *session) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	if !s.ephemeral {
		s.b.records.Touch(s.name) // gc reads the last use; an ephemeral session has no record
	}
	res, err := s.Session.Exec(ctx, cmd)
	if res != nil {
		if msg := s.staleNote(); msg != "" {
			res.Stderr += msg
			res.StderrBytes += int64(len(msg))
			if cmd.Stderr != nil {
				io.WriteString(cmd.Stderr, msg)
			}
		}
	}
	if err == nil && res != nil && res.ExitCode == 137 && !res.TimedOut && !res.Interrupted {
		if s.oomKilled(ctx) {
			msg := fmt.Sprintf("hermes-sandbox: the command was killed because the sandbox ran out of memory (docker.memory_limit %s); use less memory or raise the limit\n", s.b.cfg.MemoryLimit)
			res.Stderr += msg
			res.StderrBytes += int64(len(msg))
			if cmd.Stderr != nil {
				io.WriteString(cmd.Stderr, msg)
			}
		}
	}
	if err != nil && errors.Is(err, agent.ErrConnLost) {
		err = s.explainLost(ctx, err)
	}
	if res != nil && res.Cwd != "" {
		s.noteCwd(res.Cwd)
	}
	return res, err
}

// noteCwd keeps the session's working directory beside its record on the host, so
// `sessions list` shows it without entering the container. It writes only on a change.
func (s *session) noteCwd(cwd string) {
	if s.ephemeral {
		return // nobody lists it
	}
	s.mu.Lock()
	changed := cwd != s.lastCwd
	s.lastCwd = cwd
	s.mu.Unlock()
	if changed {
		s.b.writeCwd(s.name, cwd)
	}
}

// oomKilled reports whether the container's memory cgroup killed something since we last
// looked.
func (s *session) oomKilled(ctx context.Context) bool {
	client, err := s.Client(ctx)
	if err != nil {
		return false
	}
	n, ok := s.b.readOOMCount(ctx, client)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	killed := n > s.oomCount
	s.oomCount = n
	return killed
}

// oomFiles hold the memory cgroup's OOM kill counter: cgroup v2, then v1.
var oomFiles = []string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"}

// readOOMCount reads the container's OOM kill counter through the helper, trying first the
// file that worked last time.
func (b *Backend) readOOMCount(ctx context.Context, client *agent.Client) (int64, bool) {
	first := int(b.oomFile.Load())
	for i := range oomFiles {
		k := (first + i) % len(oomFiles)
		var buf bytes.Buffer
		var rep agent.ReadReply
		if err := client.Call(ctx, agent.CallRequest{Op: "read_file", Path: oomFiles[k], Limit: 4096}, &rep, &buf, nil); err != nil {
			continue
		}
		b.oomFile.Store(int32(k))
		for _, line := range strings.Split(buf.String(), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// explainLost adds what happened to the container when the helper stream broke.
func (s *session) explainLost(ctx context.Context, err error) error {
	s.mu.Lock()
	id := s.containerID
	s.mu.Unlock()
	if id == "" {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	info, ierr := s.b.inspect(cctx, id)
	switch {
	case ierr != nil && isNotFound(ierr):
		return fmt.Errorf("%w: the session's container was removed; the next command creates a new one", err)
	case ierr != nil:
		return fmt.Errorf("%w (and the engine does not answer: %v)", err, s.b.engineErr("inspect", shortID(id), ierr))
	case !info.State.Running && info.State.OOMKilled:
		return fmt.Errorf("%w: the session's container ran out of memory (docker.memory_limit %s) and stopped; the next command restarts it", err, s.b.cfg.MemoryLimit)
	case !info.State.Running && info.State.ExitCode == gvisorPanicExit && s.b.engine().gvisor && s.b.cfg.PidsLimit > 0:
		return fmt.Errorf("%w: the session's container stopped (exit code %d): gVisor's kernel stopped, as it does when the sandbox's processes need more host tasks than its host pids.max (%d, from docker.pids_limit %d) allows, which a fork bomb or a long storm of processes reaches on gVisor's ptrace platform; the next command restarts it",
			err, info.State.ExitCode, gvisorHostPids(s.b.cfg.PidsLimit), s.b.cfg.PidsLimit)
	case !info.State.Running:
		return fmt.Errorf("%w: the session's container stopped (exit code %d); the next command restarts it", err, info.State.ExitCode)
	}
	return err
}

// running reports whether a container is running (false when it is gone or the engine
// does not answer).
func (b *Backend) running(ctx context.Context, id string) bool {
	info, err := b.inspect(ctx, id)
	return err == nil && info.State.Running
}

// goneDown reports whether the container stopped after a helper failed to start in it.
// The engine still says "running" for a moment after its init has ended (the exec then
// fails with "cannot exec in a stopped state"), so that answer is polled for a while
// before the failure counts as the helper's own.
func (b *Backend) goneDown(ctx context.Context, id string, helperErr error) bool {
	wait := 500 * time.Millisecond
	if msg := helperErr.Error(); strings.Contains(msg, "stopped state") || strings.Contains(msg, "is not running") {
		wait = 15 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		if !b.running(ctx, id) {
			return true
		}
		if time.Now().After(deadline) || sandbox.Sleep(ctx, 50*time.Millisecond) != nil {
			return false
		}
	}
}

// helperArgs is the exec that serves a session inside its container.
func (b *Backend) helperArgs() []string {
	shell := b.shell
	if shell == "" {
		shell = "auto"
	}
	args := append([]string{agentInCtr}, b.agent.Args...)
	return append(args, "serve", "--state", helperState, "--cwd", workdir(b.cfg), "--shell", shell)
}

// startHelper starts the helper in a container as one long-lived exec and returns a client
// speaking to it over the exec's hijacked stream; the helper's stderr goes to the log.
func (b *Backend) startHelper(ctx context.Context, id, name string) (*agent.Client, error) {
	ex, err := b.cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: b.helperArgs(), Env: b.passEnv,
		AttachStdin: true, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return nil, b.engineErr("exec", name, err)
	}
	hr, err := b.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, b.engineErr("exec", name, err)
	}
	pr, pw := io.Pipe()
	log := b.log.With("container", name, "exec", shortID(ex.ID))
	stderr := channel.NewLogWriter(log, slog.LevelWarn, "helper stderr")
	demuxed := make(chan struct{})
	go func() {
		defer close(demuxed)
		_, err := stdcopy.StdCopy(pw, stderr, hr.Reader)
		pw.CloseWithError(err) // nil: EOF
		stderr.Flush()
	}()
	// The engine does not end an exec's stream when its container dies (killed, removed),
	// so a watcher ends it: the running command then fails at once instead of hanging, and
	// the next one restarts the container.
	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		wr := b.cli.ContainerWait(wctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case w := <-wr.Result:
			log.Debug("container stopped; closing the helper stream", "exit_code", w.StatusCode)
			hr.Close()
		case err := <-wr.Error:
			if wctx.Err() == nil {
				if isNotFound(err) {
					hr.Close()
				}
				log.Debug("container watch ended", "err", err)
			}
		}
	}()
	var closeOnce sync.Once
	closeFn := func() error {
		closeOnce.Do(func() {
			stopWatch()
			hr.Close()
			<-demuxed
			<-watched
			pr.Close()
		})
		return nil
	}
	ac, err := agent.NewClient(ctx, pr, hr.Conn, closeFn)
	if err != nil {
		return nil, b.helperFailed(ctx, id, name, ex.ID, stderr.Tail(), err)
	}
	return ac, nil
}

// helperFailed explains why the helper did not come up.
func (b *Backend) helperFailed(ctx context.Context, id, name, execID, stderr string, err error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var code int
	if ei, ierr := b.cli.ExecInspect(cctx, execID, client.ExecInspectOptions{}); ierr == nil && !ei.Running {
		code = ei.ExitCode
	}
	oom := false
	if ci, ierr := b.inspect(cctx, id); ierr == nil {
		oom = ci.State.OOMKilled
	}
	// SIGKILL before the greeting: in a fresh container only the OOM killer sends it.
	if oom || code == 137 {
		return &sandbox.Error{Backend: Name, Op: "start helper", ID: name, Err: fmt.Errorf(
			"the sandbox helper was killed for lack of memory (docker.memory_limit %s): raise docker.memory_limit (hermes-sandbox config set docker.memory_limit 512m): %w",
			b.cfg.MemoryLimit, sandbox.ErrInvalidConfig)}
	}
	detail := err.Error()
	if stderr != "" {
		detail += "; it printed: " + stderr
	}
	if code != 0 {
		detail += fmt.Sprintf(" (exit code %d)", code)
	}
	return &sandbox.Error{Backend: Name, Op: "start helper", ID: name, Err: fmt.Errorf("%s: %w", detail, sandbox.ErrUnavailable)}
}

// Baseline runs `true` n times the raw way, as `docker exec` does: an exec create, an attach
// that starts it and reads it to the end, and an inspect for the exit code, in the named
// session's container.
func (b *Backend) Baseline(ctx context.Context, session string, n int) (string, []time.Duration, error) {
	info, err := b.inspect(ctx, b.containerName(session))
	if err != nil {
		return "", nil, b.engineErr("inspect", b.containerName(session), err)
	}
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t := time.Now()
		ex, err := b.cli.ExecCreate(ctx, info.ID, client.ExecCreateOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
		if err != nil {
			return "", nil, b.engineErr("exec", info.Name, err)
		}
		hr, err := b.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
		if err != nil {
			return "", nil, b.engineErr("exec", info.Name, err)
		}
		_, err = stdcopy.StdCopy(io.Discard, io.Discard, hr.Reader)
		hr.Close()
		if err != nil {
			return "", nil, b.engineErr("exec", info.Name, err)
		}
		ei, err := b.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return "", nil, b.engineErr("exec", info.Name, err)
		}
		if ei.ExitCode != 0 {
			return "", nil, &sandbox.Error{Backend: Name, Op: "baseline", ID: info.Name, Err: fmt.Errorf("`true` exited %d", ei.ExitCode)}
		}
		ds = append(ds, time.Since(t))
	}
	return "raw Engine API exec (create, attach, inspect)", ds, nil
}

var (
	_ sandbox.Session    = (*session)(nil)
	_ sandbox.JobRunner  = (*session)(nil)
	_ sandbox.FileSystem = (*session)(nil)
	_ sandbox.Terminal   = (*session)(nil)
)
