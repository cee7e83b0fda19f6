//go:build !windows

package singularity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/internal/flock"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// session is a channel session (commands, jobs, files and the terminal over the helper
// stream) plus what only this backend knows: whether it has started a helper before, and the
// current helper process.
type session struct {
	*channel.Session
	b    *Backend
	name string

	mu      sync.Mutex
	started bool          // guarded by mu; a helper ran before in this process
	exited  chan struct{} // guarded by mu; closed when the current helper process has exited
}

// start is the channel's Starter: it makes sure the session's instance runs and attaches a
// helper to it. An instance that vanished (stopped, host rebooted) is started again and the
// result says the environment was recreated.
func (s *session) start(ctx context.Context) (channel.Started, error) {
	b := s.b
	if b.isClosed() {
		return channel.Started{}, wrap("start", s.name, sandbox.ErrClosed)
	}
	recreated := false
	for attempt := 0; ; attempt++ {
		fresh, err := b.ensureInstance(ctx, s.name)
		if err != nil {
			return channel.Started{}, wrap("start", s.name, err)
		}
		if fresh.started {
			s.mu.Lock()
			recreated = recreated || fresh.existed || s.started
			s.mu.Unlock()
		}
		client, exited, err := b.startHelper(ctx, s.name)
		if err == nil {
			s.mu.Lock()
			s.started = true
			s.exited = exited
			s.mu.Unlock()
			b.records.Touch(s.name)
			if recreated {
				b.log.Info("session's instance was recreated; earlier state is gone", "session", s.name)
			}
			return channel.Started{Client: client, Recreated: recreated}, nil
		}
		// The instance may have stopped between the check and the exec: start it once more.
		if attempt > 0 || ctx.Err() != nil {
			return channel.Started{}, wrap("start", s.name, err)
		}
		if running, lerr := b.running(ctx, b.instanceName(s.name)); lerr != nil || running {
			return channel.Started{}, wrap("start", s.name, err)
		}
	}
}

// helperExited is closed when the session's current helper process has exited (nil before
// the first start). Tests use it to wait for a stop to take effect.
func (s *session) helperExited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exited
}

// instanceInfo is one entry of `instance list --json`.
type instanceInfo struct {
	Instance string `json:"instance"`
	Pid      int    `json:"pid"`
	Image    string `json:"img"`
}

// instances lists the user's running instances.
func (b *Backend) instances(ctx context.Context) ([]instanceInfo, error) {
	out, err := b.run(ctx, listArgs()...)
	if err != nil {
		return nil, err
	}
	var list struct {
		Instances []instanceInfo `json:"instances"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("read `instance list --json`: %w", err)
	}
	return list.Instances, nil
}

// running reports whether the named instance runs.
func (b *Backend) running(ctx context.Context, instance string) (bool, error) {
	list, err := b.instances(ctx)
	if err != nil {
		return false, err
	}
	for _, i := range list {
		if i.Instance == instance {
			return true, nil
		}
	}
	return false, nil
}

// ensured says what ensureInstance did.
type ensured struct {
	started bool // the instance was not running and was started now
	existed bool // a record says an instance ran for this session before
}

// ensureInstance makes sure the session's instance runs, starting it if needed.
func (b *Backend) ensureInstance(ctx context.Context, session string) (ensured, error) {
	name := b.instanceName(session)
	// One process starts it; the others wait until it is ready. The runtime may list an
	// instance before it has finished starting, so "it runs" is only safe to act on once no
	// process of ours is starting it.
	// The lock lives outside the session directory, which only a started session has.
	locks := filepath.Join(b.dir, "locks")
	if err := os.MkdirAll(locks, 0o700); err != nil {
		return ensured{}, fmt.Errorf("lock directory: %w", err)
	}
	unlock, err := flock.LockContext(ctx, filepath.Join(locks, session+".start"))
	switch {
	case err == nil:
		defer unlock()
	case errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOLCK):
		// A file system without flock (Lustre mounted without it): start unguarded.
		b.log.Debug("no start lock here", "session", session, "err", err)
	default:
		return ensured{}, err
	}
	dir := b.sessionDir(session)
	if running, err := b.running(ctx, name); err != nil || running {
		return ensured{}, err
	}
	_, _, existed := b.records.Read(session)
	e := ensured{started: true, existed: existed}
	image, err := b.image(ctx)
	if err != nil {
		return ensured{}, err
	}
	helperPath, _, err := helper()
	if err != nil {
		return ensured{}, err
	}
	spec := startSpec{Image: image, Instance: name, Helper: helperPath, Workspace: filepath.Join(dir, "workspace"),
		Binds: b.cfg.Binds, Limits: !b.noLimits.Load()}
	if !b.cfg.Readonly {
		spec.Overlay = filepath.Join(dir, "overlay")
	}
	for _, d := range []string{spec.Workspace, spec.Overlay} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return ensured{}, fmt.Errorf("session directory: %w", err)
		}
	}
	if err := b.startInstance(ctx, spec); err != nil {
		// Another process may have started it at the same moment.
		if running, lerr := b.running(ctx, name); lerr == nil && running {
			return ensured{started: true, existed: e.existed}, nil
		}
		return ensured{}, err
	}
	b.records.Save(session, sandbox.IDRecord{ID: name})
	return e, nil
}

// startInstance runs `instance start`. Unprivileged users get a pids limit only where cgroups
// v2 is delegated to them; where the runtime refuses the limit, the instance starts without
// it (once refused, the backend stops asking), and Warnings says so.
func (b *Backend) startInstance(ctx context.Context, spec startSpec) error {
	b.log.Debug("starting instance", "instance", spec.Instance, "image", spec.Image)
	_, err := b.run(ctx, startArgs(spec)...)
	var re *runtimeError
	if err == nil || !spec.Limits || !errors.As(err, &re) {
		return err
	}
	spec.Limits = false
	if _, err2 := b.run(ctx, startArgs(spec)...); err2 != nil {
		return err // the first failure is the one to explain
	}
	b.noLimits.Store(true)
	b.log.Warn("the runtime refused a pids limit; instances run without one", "instance", spec.Instance, "err", err)
	return nil
}

// image returns the local image to start instances from, converting a remote reference into
// a cached SIF file the first time.
func (b *Backend) image(ctx context.Context) (string, error) {
	if !remoteImage(b.cfg.Image) {
		return b.localImage()
	}
	return b.build(ctx, b.cfg.Image, filepath.Join(b.cacheDir(), cachedImageName(b.cfg.Image)), b.progress())
}

// progress reports to the factory's progress writer.
func (b *Backend) progress() sandbox.Progress { return sandbox.Progress{W: b.opts.Progress} }

// cacheDir holds the SIF files made from remote references and imported root filesystems.
func (b *Backend) cacheDir() string { return filepath.Join(b.dir, "images") }

// build makes the SIF file dst from src (a remote reference or a root filesystem directory)
// unless it exists, through a temporary file so that a failed build leaves nothing behind.
func (b *Backend) build(ctx context.Context, src, dst string, p sandbox.Progress) (string, error) {
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	b.buildMu.Lock()
	defer b.buildMu.Unlock()
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", fmt.Errorf("image cache: %w", err)
	}
	tmp := fmt.Sprintf("%s%s%d.sif", dst, partialInfix, os.Getpid())
	os.Remove(tmp)
	defer os.Remove(tmp)
	p.Printf("singularity: converting %s to a SIF image (once; cached in %s)\n", src, filepath.Dir(dst))
	if _, err := b.run(ctx, buildArgs(tmp, src)...); err != nil {
		return "", wrap("image", src, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("image cache: %w", err)
	}
	return dst, nil
}

// localImage checks a local SIF file (or sandbox directory) and returns its absolute path.
func (b *Backend) localImage() (string, error) {
	p, err := filepath.Abs(b.cfg.Image)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err != nil {
		return "", sandbox.WithKind(sandbox.ErrNotFound, fmt.Errorf("image %s: %w: point singularity.image at a SIF file, or at a docker:// reference to "+
			"convert once (hermes-sandbox config set singularity.image docker://python:3.12-slim)", p, err))
	}
	return p, nil
}

// writeEnvFile writes the passthrough variables to the session's 0600 env file and returns
// its path ("" when there are none).
func (b *Backend) writeEnvFile(session string) (string, error) {
	p := filepath.Join(b.sessionDir(session), "env")
	if len(b.passEnv) == 0 {
		os.Remove(p)
		return "", nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	if err := writeFileAtomic(p, envFileContent(b.passEnv)); err != nil {
		return "", fmt.Errorf("env file: %w", err)
	}
	return p, nil
}

// startHelper runs the session's helper in its instance as a child process whose stdin and
// stdout carry the protocol, and returns a client for it and a channel closed when the
// process has exited. The helper's stderr goes to the log.
func (b *Backend) startHelper(ctx context.Context, session string) (*agent.Client, chan struct{}, error) {
	exe, err := b.executable(ctx)
	if err != nil {
		return nil, nil, err
	}
	_, pre, err := helper()
	if err != nil {
		return nil, nil, err
	}
	envFile, err := b.writeEnvFile(session)
	if err != nil {
		return nil, nil, err
	}
	args := execArgs(execSpec{Instance: b.instanceName(session), EnvFile: envFile, Pre: pre,
		Cwd: workdir(b.cfg), Shell: b.shell})
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, err
	}
	stderr := channel.NewLogWriter(b.log.With("session", session), slog.LevelDebug, "helper stderr")
	cmd := exec.Command(exe, args...) // not bound to ctx: the helper outlives this call
	cmd.Dir = b.dir
	cmd.Env = runtimeEnv()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	cmd.WaitDelay = time.Second
	// Its own process group: a Ctrl-C at the terminal reaches the caller, which cancels the
	// command inside the sandbox, instead of killing the whole session's helper.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, nil, runtimeErr(filepath.Base(exe), subcommand(args), err, nil)
	}
	// Held while the helper runs: gc leaves an instance with a helper attached alone.
	lock, lerr := b.lockAttached(session)
	if lerr != nil {
		b.log.Warn("attachment lock", "session", session, "err", lerr)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { // owned by closeFn, which waits for it
		waitErr = cmd.Wait()
		if lock != nil {
			lock.Close()
		}
		close(exited)
	}()
	var once sync.Once
	closeFn := func() error {
		once.Do(func() {
			inW.Close() // the helper ends when its input does
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
			outR.Close()
		})
		return nil
	}
	client, err := agent.NewClient(ctx, outR, inW, closeFn)
	if err != nil {
		closeFn()
		if ctx.Err() == nil {
			err = helperFailed(filepath.Base(exe), args, waitErr, stderr.Tail(), err)
		}
		return nil, nil, err
	}
	return client, exited, nil
}

// helperFailed explains a helper that did not greet: the runtime's own complaint (an
// instance that is gone, a missing binary) matters more than the empty stream.
func helperFailed(exe string, args []string, waitErr error, stderr string, err error) error {
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		return &runtimeError{exe: exe, args: subcommand(args), code: ee.ExitCode(), stderr: stderr, err: err}
	}
	if stderr != "" {
		return fmt.Errorf("%w: %s", err, stderr)
	}
	return err
}

// stop stops an instance: gracefully, then by force if that fails.
func (b *Backend) stop(ctx context.Context, instance string) error {
	_, err := b.run(ctx, stopArgs(instance, false)...)
	if err == nil {
		return nil
	}
	if running, lerr := b.running(ctx, instance); lerr == nil && !running {
		return nil
	}
	if _, ferr := b.run(ctx, stopArgs(instance, true)...); ferr != nil {
		return err
	}
	return nil
}

var (
	_ sandbox.Session    = (*session)(nil)
	_ sandbox.JobRunner  = (*session)(nil)
	_ sandbox.FileSystem = (*session)(nil)
	_ sandbox.Terminal   = (*session)(nil)
)
