package modal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Paths inside the sandbox.
const (
	hermesDir   = "/tmp/.hermes-sandbox"
	helperState = hermesDir + "/state"
)

// helperArch is the architecture of Modal's machines.
const helperArch = "amd64"

// errFallback says the helper cannot run in this sandbox, so commands go one Exec each.
type errFallback struct{ reason string }

func (e *errFallback) Error() string {
	return "the sandbox helper cannot run here (" + e.reason + "); jobs, the terminal and streaming stdin need it"
}
func (e *errFallback) Unwrap() error { return sandbox.ErrUnsupported }

// session is a channel session (commands, jobs, files and the terminal over the helper's
// Exec) plus the Modal sandbox it lives in and, when the helper cannot run, the per-command
// Exec fallback.
type session struct {
	*channel.Session
	b    *Backend
	name string

	mu        sync.Mutex
	sb        *modalsdk.Sandbox // guarded by mu
	fallback  string            // guarded by mu; why the helper is not used; "" while it is
	recreated bool              // guarded by mu; to report from the fallback path
}

// start is the channel's Starter: a running sandbox and a helper attached to it.
func (s *session) start(ctx context.Context) (channel.Started, error) {
	b := s.b
	s.mu.Lock()
	known := s.sb
	s.mu.Unlock()
	sb, recreated, err := b.ensure(ctx, s.name, known)
	if err != nil {
		return channel.Started{}, err
	}
	client, err := b.startHelper(ctx, sb)
	if err != nil && gone(err) {
		// The sandbox ended between the check and the exec: make a new one, once.
		if sb, _, err = b.ensure(ctx, s.name, sb); err != nil {
			return channel.Started{}, err
		}
		recreated = true
		client, err = b.startHelper(ctx, sb)
	}
	s.mu.Lock()
	s.sb = sb
	s.mu.Unlock()
	var fb *errFallback
	if errors.As(err, &fb) {
		s.mu.Lock()
		s.fallback = fb.reason
		s.recreated = s.recreated || recreated
		s.mu.Unlock()
		b.noteFallback(fb.reason)
		return channel.Started{}, err
	}
	if err != nil {
		return channel.Started{}, b.mapErr("start helper", s.name, err)
	}
	return channel.Started{Client: client, Recreated: recreated}, nil
}

func (s *session) onClose() error {
	s.mu.Lock()
	sb := s.sb
	s.sb = nil
	s.mu.Unlock()
	if sb != nil {
		return sb.Detach()
	}
	return nil
}

// Exec runs cmd over the helper, or as one Exec when the helper cannot run.
func (s *session) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	s.b.records.Touch(s.name) // gc reads the last use
	if !s.usesFallback() {
		res, err := s.Session.Exec(ctx, cmd)
		var fb *errFallback
		if !errors.As(err, &fb) {
			return res, err
		}
	}
	return s.execFallback(ctx, cmd)
}

// ResolvePath resolves p over the helper (sandbox.PathResolver). The per-command fallback
// cannot: there it fails with ErrUnsupported, and the gate judges p with ~ and the session's
// directory applied.
func (s *session) ResolvePath(ctx context.Context, p string) (string, error) {
	if !s.usesFallback() {
		r, err := s.Session.ResolvePath(ctx, p)
		var fb *errFallback
		if !errors.As(err, &fb) {
			return r, err
		}
	}
	return "", &sandbox.Error{Backend: Name, Op: "resolve " + p, ID: s.name,
		Err: fmt.Errorf("the per-command fallback cannot resolve paths: %w", sandbox.ErrUnsupported)}
}

func (s *session) usesFallback() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fallback != ""
}

// agentBinary is the helper for the sandbox's architecture; without one, commands run one
// Exec each.
func (b *Backend) agentBinary() (*agentbin.Binary, error) {
	arch := b.extra.HelperArch
	if arch == "" {
		arch = helperArch
	}
	bin, err := b.helper.Load(arch)
	if err != nil {
		return nil, &errFallback{reason: err.Error()}
	}
	return bin, nil
}

// startScript runs the helper ($0) with its arguments, after making the session's starting
// directory; it exits 97 when the helper has not been uploaded to this sandbox yet.
func (b *Backend) startScript() string {
	return "mkdir -p " + sandbox.ShellQuote(b.cwd) + " 2>/dev/null; [ -f \"$0\" ] || exit 97; [ -x \"$0\" ] || chmod 755 \"$0\" || exit 98; exec \"$0\" \"$@\""
}

// startHelper starts the helper in sb as one long-lived Exec, uploading it first if the sandbox
// does not have it, and returns a client speaking to it over the Exec's stdin and stdout.
func (b *Backend) startHelper(ctx context.Context, sb *modalsdk.Sandbox) (*agent.Client, error) {
	bin, err := b.agentBinary()
	if err != nil {
		return nil, err
	}
	remote := hermesDir + "/" + bin.Name()
	argv := append([]string{"/bin/sh", "-c", b.startScript(), remote}, bin.Args...)
	argv = append(argv, "serve", "--state", helperState, "--cwd", b.cwd, "--shell", b.shell)
	client, err := agentbin.Start(ctx, func(ctx context.Context) (*agent.Client, error) {
		cp, err := sb.Exec(ctx, argv, &modalsdk.SandboxExecParams{Env: b.passEnv})
		if err != nil {
			return nil, err
		}
		client, tail, err := b.attach(ctx, cp)
		if err == nil {
			return client, nil
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		code, werr := cp.Wait(wctx, nil)
		if werr != nil {
			if gone(werr) {
				return nil, werr
			}
			code = -1
		}
		return nil, &agentbin.StartError{Code: code, Output: tail(), Err: err}
	}, func(ctx context.Context) error {
		start := time.Now()
		if err := agentbin.Install(ctx, &sandboxTarget{b: b, sb: sb}, bin, remote); err != nil {
			var ie *agentbin.InstallError
			if errors.As(err, &ie) && ie.CannotRun() {
				return &errFallback{reason: err.Error()}
			}
			return err
		}
		b.log.Debug("uploaded the helper", "sandbox_id", sb.SandboxID, "bytes", bin.Size, "took", time.Since(start))
		return nil
	})
	var se *agentbin.StartError
	switch {
	case err == nil:
		return client, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &se) && se.CannotRun():
		// No /bin/sh, an exec format error, or a read-only /tmp: the helper cannot run.
		return nil, &errFallback{reason: se.Error()}
	case se != nil:
		return nil, fmt.Errorf("%w: %w", se, sandbox.ErrUnavailable)
	}
	return nil, err
}

// sandboxTarget installs the helper through the SDK's filesystem API and Exec
// (agentbin.Target).
type sandboxTarget struct {
	b  *Backend
	sb *modalsdk.Sandbox
}

func (t *sandboxTarget) Write(ctx context.Context, p string, r io.Reader, _ int64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return &errFallback{reason: err.Error()}
	}
	if err := t.sb.Filesystem.WriteBytes(ctx, data, p, nil); err != nil {
		var perm modalsdk.SandboxFilesystemPermissionError
		if errors.As(err, &perm) {
			return &errFallback{reason: "cannot write " + p + ": " + err.Error()}
		}
		return t.b.mapErr("upload helper", t.sb.SandboxID, err)
	}
	return nil
}

func (t *sandboxTarget) Run(ctx context.Context, script string, args ...string) (int, string, error) {
	cp, err := t.sb.Exec(ctx, append([]string{"/bin/sh", "-c", script, "sh"}, args...), nil)
	if err != nil {
		return -1, "", t.b.mapErr("upload helper", t.sb.SandboxID, err)
	}
	var out sandbox.TailWriter
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(&out, io.MultiReader(cp.Stdout, cp.Stderr))
	}()
	code, err := cp.Wait(ctx, nil)
	<-done
	if err != nil {
		return -1, "", t.b.mapErr("upload helper", t.sb.SandboxID, err)
	}
	return code, out.String(), nil
}

// attach speaks the helper protocol over an Exec's stdio. Each stdin Write is one RPC, so
// writes are batched; the helper's stderr is kept for error messages.
func (b *Backend) attach(ctx context.Context, cp *modalsdk.ContainerProcess) (*agent.Client, func() string, error) {
	w := newBatchWriter(cp.Stdin)
	tail := &sandbox.TailWriter{}
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		io.Copy(tail, cp.Stderr)
	}()
	var once sync.Once
	closeFn := func() error {
		once.Do(func() {
			w.Close() // EOF: the helper ends, killing what still runs
			cp.Stdout.Close()
			cp.Stderr.Close()
			<-stderrDone
		})
		return nil
	}
	client, err := agent.NewClient(ctx, cp.Stdout, w, closeFn)
	if err != nil {
		return nil, tail.String, err
	}
	return client, tail.String, nil
}

// batchWriter turns many small writes into few stdin RPCs: the first writer sends at once;
// what others write meanwhile is queued and sent by it in one RPC when the previous ends.
type batchWriter struct {
	w io.WriteCloser

	mu       sync.Mutex
	cond     *sync.Cond
	buf      []byte // guarded by mu
	flushing bool   // guarded by mu
	err      error  // guarded by mu
	closed   bool   // guarded by mu
}

const maxQueued = 4 << 20

func newBatchWriter(w io.WriteCloser) *batchWriter {
	bw := &batchWriter{w: w}
	bw.cond = sync.NewCond(&bw.mu)
	return bw
}

func (bw *batchWriter) Write(p []byte) (int, error) {
	bw.mu.Lock()
	for bw.flushing && len(bw.buf) > maxQueued && bw.err == nil {
		bw.cond.Wait()
	}
	if bw.err != nil || bw.closed {
		err := bw.err
		bw.mu.Unlock()
		if err == nil {
			err = io.ErrClosedPipe
		}
		return 0, err
	}
	if bw.flushing {
		bw.buf = append(bw.buf, p...)
		bw.mu.Unlock()
		return len(p), nil
	}
	bw.flushing = true
	data := append(bw.buf, p...)
	bw.buf = nil
	bw.mu.Unlock()
	for {
		_, err := bw.w.Write(data)
		bw.mu.Lock()
		if err != nil {
			bw.err = err
		}
		if err != nil || len(bw.buf) == 0 {
			bw.flushing = false
			bw.cond.Broadcast()
			bw.mu.Unlock()
			if err != nil {
				return 0, err
			}
			return len(p), nil
		}
		data, bw.buf = bw.buf, nil
		bw.cond.Broadcast()
		bw.mu.Unlock()
	}
}

// Close waits for queued bytes to be sent and closes the stream (EOF).
func (bw *batchWriter) Close() error {
	bw.mu.Lock()
	for bw.flushing && bw.err == nil {
		bw.cond.Wait()
	}
	if bw.closed {
		bw.mu.Unlock()
		return nil
	}
	bw.closed = true
	rest, err := bw.buf, bw.err
	bw.buf = nil
	bw.mu.Unlock()
	if err == nil && len(rest) > 0 {
		_, err = bw.w.Write(rest)
	}
	return errors.Join(err, bw.w.Close())
}

var (
	_ sandbox.Session    = (*session)(nil)
	_ sandbox.JobRunner  = (*session)(nil)
	_ sandbox.FileSystem = (*session)(nil)
	_ sandbox.Terminal   = (*session)(nil)
)
