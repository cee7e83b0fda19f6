//go:build unix

package channel

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// helpers starts in-process helpers over pipes, as the local backend does, and lets a test
// cut the current stream to simulate a lost sandbox.
type helpers struct {
	t     *testing.T
	state string

	mu      sync.Mutex
	starts  int
	cut     func()
	lost    bool // the next start reports a recreated sandbox
	failing error
}

func (h *helpers) start(ctx context.Context) (Started, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing != nil {
		return Started{}, h.failing
	}
	h.starts++
	srv, err := agent.NewServer(agent.Options{StateDir: h.state, Shell: "/bin/sh", Env: []string{"PATH=/usr/bin:/bin"}, Cwd: "/"})
	if err != nil {
		return Started{}, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := srv.Serve(inR, outW)
		outW.CloseWithError(errors.Join(err, io.EOF))
		inR.Close()
	}()
	closeFn := func() error { inW.Close(); <-done; return nil }
	c, err := agent.NewClient(ctx, outR, inW, closeFn)
	if err != nil {
		return Started{}, err
	}
	h.cut = func() { outW.CloseWithError(io.ErrUnexpectedEOF) }
	recreated := h.lost
	h.lost = false
	return Started{Client: c, Recreated: recreated}, nil
}

func newSession(t *testing.T) (*Session, *helpers) {
	h := &helpers{t: t, state: t.TempDir()}
	s := New(Options{Backend: "test", Name: "s1", Start: h.start, SpillDir: t.TempDir()})
	t.Cleanup(func() { s.Close() })
	return s, h
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestExecStartsLazilyAndKeepsState(t *testing.T) {
	s, h := newSession(t)
	if h.starts != 0 {
		t.Fatalf("New started a helper")
	}
	res, err := s.Exec(ctxT(t), sandbox.Command{Script: "cd /tmp && export X=1; echo out; echo err >&2; exit 3"})
	if err != nil || res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.Cwd != "/tmp" {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	res, err = s.Exec(ctxT(t), sandbox.Command{Script: `echo "$X"`})
	if err != nil || res.Stdout != "1\n" || h.starts != 1 {
		t.Errorf("second Exec = %+v, %v after %d starts; want the same helper and state", res, err, h.starts)
	}
}

// TestLostStreamRestartsAndReportsRecreatedOnce: after the stream dies, the next command
// starts a new helper; a recreated sandbox is reported on exactly one result.
func TestLostStreamRestartsAndReportsRecreatedOnce(t *testing.T) {
	s, h := newSession(t)
	if _, err := s.Exec(ctxT(t), sandbox.Command{Script: "true"}); err != nil {
		t.Fatal(err)
	}
	old, err := s.Client(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.lost = true
	h.cut()
	h.mu.Unlock()
	select {
	case <-old.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not notice its stream was cut")
	}
	res, err := s.Exec(ctxT(t), sandbox.Command{Script: "echo back"})
	if err != nil || res.Stdout != "back\n" || !res.EnvironmentRecreated {
		t.Fatalf("Exec after the stream died = %+v, %v; want it run by a new helper, recreated", res, err)
	}
	if res, _ := s.Exec(ctxT(t), sandbox.Command{Script: "true"}); res.EnvironmentRecreated || h.starts != 2 {
		t.Errorf("recreated reported again (%v) or %d starts; want once, 2", res.EnvironmentRecreated, h.starts)
	}
}

func TestErrorsMapToSentinels(t *testing.T) {
	s, h := newSession(t)
	ctx := ctxT(t)
	if _, err := s.Exec(ctx, sandbox.Command{}); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("empty command = %v; want ErrInvalidConfig", err)
	}
	_, err := s.ReadFile(ctx, filepath.Join(h.state, "missing"), 0, 0)
	var se *sandbox.Error
	if !errors.Is(err, sandbox.ErrNotFound) || !errors.As(err, &se) || se.Backend != "test" || se.ID != "s1" {
		t.Errorf("ReadFile(missing) = %v; want a test backend error matching ErrNotFound", err)
	}
	if _, err := s.ReadFile(ctx, h.state, 0, 0); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("ReadFile(directory) = %v; want ErrInvalidConfig", err)
	}
	ro := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(ro, 0o500)
	if os.Geteuid() != 0 {
		if err := s.WriteFile(ctx, filepath.Join(ro, "f"), []byte("x"), 0o600); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("WriteFile(read-only dir) = %v; want fs.ErrPermission", err)
		}
	}
	if _, err := s.PollJob(ctx, "job-none"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("PollJob(unknown) = %v; want ErrNotFound", err)
	}
	h.mu.Lock()
	h.failing = errors.New("no sandbox here")
	h.cut()
	h.mu.Unlock()
	s2 := New(Options{Backend: "test", Name: "s2", Start: h.start, SpillDir: t.TempDir()})
	if _, err := s2.Exec(ctx, sandbox.Command{Script: "true"}); err == nil || !strings.Contains(err.Error(), "no sandbox here") {
		t.Errorf("Exec when the helper cannot start = %v; want the start error", err)
	}
	s.Close()
	if _, err := s.Exec(ctx, sandbox.Command{Script: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Exec after Close = %v; want ErrClosed", err)
	}
}

func TestMapErrorAndOnClose(t *testing.T) {
	h := &helpers{t: t, state: t.TempDir()}
	mapped := errors.New("mapped")
	closed := 0
	s := New(Options{Backend: "test", Name: "s", Start: h.start, SpillDir: t.TempDir(),
		MapError: func(op string, err error) error { return errors.Join(mapped, err) },
		OnClose:  func() error { closed++; return nil }})
	if _, err := s.ReadFile(ctxT(t), filepath.Join(h.state, "missing"), 0, 0); !errors.Is(err, mapped) {
		t.Errorf("ReadFile with MapError = %v; want the mapped error", err)
	}
	s.Close()
	s.Close()
	if closed != 1 {
		t.Errorf("OnClose ran %d times; want once", closed)
	}
}

func TestLogWriterLinesAndTail(t *testing.T) {
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w := NewLogWriter(log, slog.LevelWarn, "helper stderr")
	io.WriteString(w, "one\ntw")
	io.WriteString(w, "o\n\nthree\nfour\nfive\nsix\nunfinished")
	if got := w.Tail(); got != "two; three; four; five; six; unfinished" {
		t.Errorf("Tail = %q; want the last 5 lines and the unfinished one", got)
	}
	if strings.Count(logged.String(), "level=WARN") != 7 || !strings.Contains(logged.String(), `line=two`) || strings.Contains(logged.String(), "unfinished") {
		t.Errorf("logged:\n%s\nwant each finished line (the empty one too) at WARN, and not the unfinished one", logged.String())
	}
	w.Flush()
	if !strings.Contains(logged.String(), "line=unfinished") {
		t.Errorf("Flush did not log the unfinished line")
	}
	long := strings.Repeat("x", 5000)
	io.WriteString(w, long)
	if !strings.Contains(logged.String(), long) {
		t.Errorf("a 5000-byte line without a newline was not logged")
	}
	NewLogWriter(nil, slog.LevelInfo, "m").Write([]byte("no logger\n")) // must not panic
}

// TestStartDoesNotHoldTheSession: while a helper is starting (a container create, an upload),
// a caller with a shorter deadline gives up on its own, Close does not wait for the start to
// finish on its own time (it cuts it short), and the client the cut start made is closed.
func TestStartDoesNotHoldTheSession(t *testing.T) {
	h := &helpers{t: t, state: t.TempDir()}
	entered := make(chan struct{})
	release := make(chan struct{})
	var startErr error
	slow := func(ctx context.Context) (Started, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
			startErr = ctx.Err()
			return Started{}, ctx.Err()
		}
		return h.start(ctx)
	}
	s := New(Options{Backend: "test", Name: "slow", Start: slow, SpillDir: t.TempDir()})
	first := make(chan error, 1)
	go func() {
		_, err := s.Exec(context.Background(), sandbox.Command{Script: "true"})
		first <- err
	}()
	<-entered
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Exec(short, sandbox.Command{Script: "true"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec with a 50 ms deadline during a start = %v; want its own deadline", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("Close waited for the start instead of cutting it short")
	}
	if !errors.Is(startErr, context.Canceled) {
		t.Errorf("the start in progress saw %v; want it cancelled by Close", startErr)
	}
	if err := <-first; err == nil {
		t.Error("the Exec whose start Close cut short succeeded")
	}
	if _, err := s.Exec(ctxT(t), sandbox.Command{Script: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Exec after Close = %v; want ErrClosed", err)
	}
}

// blockingWriter blocks every write until released.
type blockingWriter struct {
	entered chan struct{}
	once    sync.Once
	release chan struct{}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return len(p), nil
}

// TestSlowReaderHoldsOnlyItsOwnCall: a caller that does not read its live output holds up
// only its own command; another command on the same session and helper still completes.
func TestSlowReaderHoldsOnlyItsOwnCall(t *testing.T) {
	s, _ := newSession(t)
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	slow := make(chan error, 1)
	go func() {
		res, err := s.Exec(ctxT(t), sandbox.Command{Script: "echo a; echo b", Stdout: w})
		if err == nil && res.Stdout != "a\nb\n" {
			err = errors.New("slow command's output = " + res.Stdout)
		}
		slow <- err
	}()
	select {
	case <-w.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow command never wrote")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.Exec(ctx, sandbox.Command{Script: "echo other"})
	if err != nil || res.Stdout != "other\n" {
		t.Errorf("a command beside a stalled reader = %+v, %v; want it to finish", res, err)
	}
	close(w.release)
	if err := <-slow; err != nil {
		t.Errorf("the slow reader's command: %v", err)
	}
}

// TestStdinPumpEndsWithCommand: once a command has ended, nothing more is taken from the
// stdin it was given; the next reader of that stdin gets the bytes.
func TestStdinPumpEndsWithCommand(t *testing.T) {
	s, _ := newSession(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if res, err := s.Exec(ctxT(t), sandbox.Command{Script: "true", Stdin: r}); err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	r.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	if n, err := r.Read(buf); n != 1 || buf[0] != 'x' {
		t.Errorf("reading stdin after the command = %q, %v; want x (the ended command's pump took it)", buf[:n], err)
	}
}
