//go:build linux

package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/owner"
)

// The test binary doubles as the processes Start spawns, and as a client without a
// controlling terminal: TestMain runs the role named in roleEnv instead of the tests.
const (
	roleEnv    = "HERMES_DAEMON_TEST_ROLE"
	sockEnv    = "HERMES_DAEMON_TEST_SOCK"
	pidFileEnv = "HERMES_DAEMON_TEST_PIDFILE"
)

// wait bounds every wait for something that should happen; a wait that runs out is a failure.
const wait = 20 * time.Second

// testKey is the key test servers serve: the test process's own (the owner checks each call
// against the calling process, so a client must send its real key). The processes this test
// binary starts leave out their role variables, so an owner started by Start serves the test
// process.
var testKey owner.Key

func testEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERMES_DAEMON_TEST_") {
			env = append(env, kv)
		}
	}
	return env
}

// testHello is this process's call, with its real key.
func testHello(args ...string) owner.Hello {
	if len(args) == 0 {
		args = []string{"exec", "--", "true"}
	}
	h, err := owner.NewHello(args, os.Environ(), false)
	if err != nil {
		panic(err)
	}
	return h
}

func TestMain(m *testing.M) {
	k, err := owner.CurrentKey(testEnviron())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	testKey = k
	switch role := os.Getenv(roleEnv); role {
	case "":
		os.Exit(m.Run())
	case "owner":
		appendPid()
		srv := &Server{Path: os.Getenv(sockEnv), Key: testKey,
			KeepAlive: func() time.Duration { return 30 * time.Second },
			Handler: func(ctx context.Context, r *Request) (int, string) {
				r.Started()
				fmt.Fprintf(r.Stdout, "%d", os.Getpid())
				return 42, ""
			}}
		if err := srv.Listen(); err != nil {
			Ready(err)
			os.Exit(1)
		}
		Ready(nil)
		_ = srv.Serve(context.Background())
		os.Exit(0)
	case "exit":
		appendPid()
		fmt.Fprintln(os.Stderr, "test owner: exiting without a word")
		os.Exit(3)
	case "fail":
		appendPid()
		Ready(errors.New("test owner: cannot serve here"))
		waitForKill() // Start must kill it

	case "hang":
		appendPid()
		waitForKill() // never ready; Start must kill it

	case "client":
		code, err := owner.Forward(os.Getenv(sockEnv), testHello(), nil, os.Stdout, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			os.Exit(100)
		}
		os.Exit(code)
	default:
		fmt.Fprintf(os.Stderr, "unknown %s %q\n", roleEnv, role)
		os.Exit(2)
	}
}

// waitForKill waits to be killed; it exits on its own if the test process is gone (a test
// binary that timed out runs no cleanups) or after a minute, so that no test owner outlives
// the tests for long.
func waitForKill() {
	ppid := os.Getppid()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if os.Getppid() != ppid {
			break
		}
	}
	os.Exit(0)
}

func appendPid() {
	f, err := os.OpenFile(os.Getenv(pidFileEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Fprintln(f, os.Getpid())
	f.Close()
}

// --- helpers ---------------------------------------------------------------------------

type testServer struct {
	*Server
	sock   string
	done   chan error
	cancel context.CancelFunc
}

// startServer listens on a fresh socket and serves h until the test ends.
func startServer(t *testing.T, h Handler, configure ...func(*Server)) *testServer {
	t.Helper()
	s := &Server{Path: filepath.Join(t.TempDir(), "owners", "key.sock"), Key: testKey, Handler: h,
		KeepAlive: func() time.Duration { return time.Hour }}
	for _, f := range configure {
		f(s)
	}
	if err := s.Listen(); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{Server: s, sock: s.Path, done: make(chan error, 1), cancel: cancel}
	go func() { ts.done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ts.done:
		case <-time.After(wait):
			t.Error("Serve did not return after its context ended")
		}
	})
	return ts
}

// waitServe waits for Serve to return on its own.
func (ts *testServer) waitServe(t *testing.T) error {
	t.Helper()
	select {
	case err := <-ts.done:
		ts.done <- err // for the cleanup
		return err
	case <-time.After(wait):
		t.Fatal("Serve did not return")
		return nil
	}
}

func (ts *testServer) serving() bool {
	select {
	case err := <-ts.done:
		ts.done <- err
		return false
	default:
		return true
	}
}

// forward runs owner.Forward and fails the test if it does not return.
func forward(t *testing.T, sock string, h owner.Hello, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	t.Helper()
	type result struct {
		code int
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		code, err := owner.Forward(sock, h, stdin, stdout, stderr)
		ch <- result{code, err}
	}()
	select {
	case r := <-ch:
		return r.code, r.err
	case <-time.After(wait):
		t.Fatal("Forward did not return")
		return 0, nil
	}
}

// recvTimeout receives from ch, failing the test if nothing comes in time.
func recvTimeout[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// rawClient speaks the protocol by hand, to do what owner.Forward never does.
type rawClient struct {
	t    *testing.T
	conn net.Conn
}

func dialRaw(t *testing.T, sock string, hello []byte) *rawClient {
	t.Helper()
	f, err := owner.Dial(sock)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	conn, err := net.FileConn(f) // a dup that supports deadlines
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if hello != nil {
		if err := owner.WriteFrame(conn, owner.FrameHello, hello); err != nil {
			t.Fatalf("write hello: %v", err)
		}
	}
	return &rawClient{t: t, conn: conn}
}

func (c *rawClient) send(typ byte, p []byte) {
	c.t.Helper()
	if err := owner.WriteFrame(c.conn, typ, p); err != nil {
		c.t.Fatalf("send %q: %v", typ, err)
	}
}

// next returns the next frame, failing the test if none comes in time.
func (c *rawClient) next() (byte, []byte, error) {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(wait))
	typ, p, err := owner.ReadFrame(c.conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatal("timed out waiting for a frame from the owner")
	}
	return typ, p, err
}

// expect reads the next frame and checks its type.
func (c *rawClient) expect(typ byte) []byte {
	c.t.Helper()
	got, p, err := c.next()
	if err != nil || got != typ {
		c.t.Fatalf("frame = (%q, %q, %v), want %q", got, p, err, typ)
	}
	return p
}

func exitCode(p []byte) int { return int(int32(binary.BigEndian.Uint32(p))) }

// --- in-process server and client -----------------------------------------------------

func TestExitCodePassesThrough(t *testing.T) {
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		code, _ := strconv.Atoi(r.Hello.Args[len(r.Hello.Args)-1])
		return code, ""
	})
	for _, want := range []int{0, 1, 3, 42, 126, 127, 255, 256, -1, 1 << 20} {
		code, err := forward(t, ts.sock, testHello("exec", "--", strconv.Itoa(want)), nil, io.Discard, io.Discard)
		if err != nil || code != want {
			t.Errorf("Forward = (%d, %v), want %d", code, err, want)
		}
	}
}

func TestHelloReachesHandler(t *testing.T) {
	got := make(chan owner.Hello, 1)
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		got <- r.Hello
		r.Started()
		return 0, ""
	})
	h := testHello("--sandbox", "dev", "exec", "--", "echo", "héllo")
	h.Environ = append(h.Environ, "SHLVL=3", "_=/usr/bin/ü") // variables the key leaves out
	h.StdinTTY = true
	if _, err := forward(t, ts.sock, h, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	r := recvTimeout(t, got, "the hello")
	if !slices.Equal(r.Args, h.Args) || !slices.Equal(r.Environ, h.Environ) || !r.Key.Equal(h.Key) || r.TTY != h.TTY || !r.StdinTTY {
		t.Fatalf("handler got %+v, want %+v", r, h)
	}
}

type event struct{ stream, data string }

type recorder struct {
	mu     sync.Mutex
	events []event
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (r *recorder) writer(stream string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		// Adjacent writes to one stream are one event: how a write is split is not the point.
		if n := len(r.events); n > 0 && r.events[n-1].stream == stream {
			r.events[n-1].data += string(p)
		} else {
			r.events = append(r.events, event{stream, string(p)})
		}
		return len(p), nil
	})
}

func TestOutputReachesClientInOrder(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", (3<<20)/16+7) // over the 1 MiB frame split
	var want []event
	for i := 0; i < 50; i++ {
		want = append(want, event{"out", fmt.Sprintf("out %d\n", i)}, event{"err", fmt.Sprintf("err %d\n", i)})
	}
	want = append(want, event{"out", big}, event{"err", "done\n"})
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		for _, e := range want {
			w := r.Stdout
			if e.stream == "err" {
				w = r.Stderr
			}
			if n, err := io.WriteString(w, e.data); err != nil || n != len(e.data) {
				return 99, ""
			}
		}
		return 7, ""
	})
	rec := &recorder{}
	code, err := forward(t, ts.sock, testHello(), nil, rec.writer("out"), rec.writer("err"))
	if err != nil || code != 7 {
		t.Fatalf("Forward = (%d, %v)", code, err)
	}
	if len(rec.events) != len(want) {
		t.Fatalf("got %d output events, want %d", len(rec.events), len(want))
	}
	for i := range want {
		if rec.events[i] != want[i] {
			g, w := rec.events[i], want[i]
			t.Fatalf("event %d = %s %.40q (%d bytes), want %s %.40q (%d bytes)", i, g.stream, g.data, len(g.data), w.stream, w.data, len(w.data))
		}
	}
}

// probeReader records whether anyone read it.
type probeReader struct {
	r      io.Reader
	once   sync.Once
	called chan struct{}
	reads  atomic.Int64
}

func newProbe(r io.Reader) *probeReader { return &probeReader{r: r, called: make(chan struct{})} }

func (p *probeReader) Read(b []byte) (int, error) {
	p.once.Do(func() { close(p.called) })
	p.reads.Add(1)
	return p.r.Read(b)
}

func (p *probeReader) wasRead() bool {
	select {
	case <-p.called:
		return true
	default:
		return false
	}
}

func TestStdinReachesHandler(t *testing.T) {
	input := make([]byte, 300<<10) // several of the client's reads
	rand.New(rand.NewSource(2)).Read(input)
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		b, err := io.ReadAll(r.Stdin)
		if err != nil {
			return 99, ""
		}
		_, _ = r.Stdout.Write(b)
		return 0, ""
	})
	probe := newProbe(bytes.NewReader(input))
	var out bytes.Buffer
	code, err := forward(t, ts.sock, testHello(), probe, &out, io.Discard)
	if err != nil || code != 0 {
		t.Fatalf("Forward = (%d, %v)", code, err)
	}
	if !bytes.Equal(out.Bytes(), input) {
		t.Fatalf("the handler read %d bytes of stdin back, want the %d sent", out.Len(), len(input))
	}
	if probe.reads.Load() < 2 {
		t.Fatalf("stdin read %d times", probe.reads.Load())
	}

	// Without stdin, the handler reads EOF at once.
	out.Reset()
	if code, err := forward(t, ts.sock, testHello(), nil, &out, io.Discard); err != nil || code != 0 || out.Len() != 0 {
		t.Fatalf("Forward without stdin = (%d, %v, %q)", code, err, out.String())
	}
}

// notReadWindow is how long a test watches for a read that must not happen.
const notReadWindow = 300 * time.Millisecond

func TestStdinIsReadOnlyWhenTheHandlerReads(t *testing.T) {
	t.Run("handler reads late", func(t *testing.T) {
		probe := newProbe(strings.NewReader("input"))
		ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
			r.Started()
			fmt.Fprint(r.Stdout, "before;")
			select {
			case <-probe.called:
				fmt.Fprint(r.Stderr, "the client read its stdin before the handler asked")
				return 98, ""
			case <-time.After(notReadWindow):
			}
			b, _ := io.ReadAll(r.Stdin)
			fmt.Fprintf(r.Stdout, "read %q", b)
			return 0, ""
		})
		var out, errOut bytes.Buffer
		code, err := forward(t, ts.sock, testHello(), probe, &out, &errOut)
		if err != nil || code != 0 {
			t.Fatalf("Forward = (%d, %v), stderr %q", code, err, errOut.String())
		}
		if out.String() != `before;read "input"` {
			t.Fatalf("stdout = %q", out.String())
		}
	})
	t.Run("handler never reads", func(t *testing.T) {
		ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
			r.Started()
			time.Sleep(notReadWindow) // give an eager client the time to read
			fmt.Fprint(r.Stdout, "no input needed")
			return 5, ""
		})
		// A stdin that never has anything to read, like an idle terminal: the call must end
		// without waiting for it, and without reading it.
		pr, pw := io.Pipe()
		t.Cleanup(func() { pw.Close() })
		probe := newProbe(pr)
		var out bytes.Buffer
		code, err := forward(t, ts.sock, testHello(), probe, &out, io.Discard)
		if err != nil || code != 5 || out.String() != "no input needed" {
			t.Fatalf("Forward = (%d, %v, %q)", code, err, out.String())
		}
		if probe.wasRead() {
			t.Fatal("the client read its stdin though the handler never did")
		}
	})
}

func TestDecline(t *testing.T) {
	var ran atomic.Int64
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		ran.Add(1)
		if r.Hello.Args[0] == "late" {
			r.Started()
			return 0, "declined too late"
		}
		return 0, "declined for the test"
	})
	var out bytes.Buffer
	_, err := forward(t, ts.sock, testHello("exec"), nil, &out, &out)
	if !errors.Is(err, owner.ErrNoOwner) || !strings.Contains(err.Error(), "declined for the test") {
		t.Fatalf("a declined call: %v, want ErrNoOwner with the reason", err)
	}
	if out.Len() != 0 {
		t.Fatalf("a declined call wrote %q", out.String())
	}
	code, err := forward(t, ts.sock, testHello("late"), nil, &out, &out)
	if err == nil || errors.Is(err, owner.ErrNoOwner) || code == 0 {
		t.Fatalf("a call declined after Started: (%d, %v), want a failure that is not ErrNoOwner", code, err)
	}
	if ran.Load() != 2 {
		t.Fatalf("handler ran %d times", ran.Load())
	}
}

func TestOtherKeyFallsBack(t *testing.T) {
	var ran atomic.Int64
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		ran.Add(1)
		r.Started()
		return 0, ""
	})
	for name, mut := range map[string]func(*owner.Key){
		"uid":  func(k *owner.Key) { k.UID++ },
		"exe":  func(k *owner.Key) { k.Exe += "x" },
		"cwd":  func(k *owner.Key) { k.Cwd = "/elsewhere" },
		"ctx":  func(k *owner.Key) { k.Ctx += "x" },
		"env":  func(k *owner.Key) { k.Env = []string{"A=1", "B=3"} },
		"none": func(k *owner.Key) { *k = owner.Key{} },
	} {
		h := testHello()
		h.Key.Env = slices.Clone(h.Key.Env)
		mut(&h.Key)
		_, err := forward(t, ts.sock, h, nil, io.Discard, io.Discard)
		if !errors.Is(err, owner.ErrNoOwner) {
			t.Errorf("%s: a client with another key: %v, want ErrNoOwner", name, err)
		}
	}
	// The key must also be the one the call's own environment makes: a client never has an
	// owner run it under variables other than its own.
	for name, environ := range map[string][]string{
		"extra variable":   {"A=1", "B=2", "EXTRA=1"},
		"missing variable": {"A=1"},
		"other value":      {"A=1", "B=3"},
		"empty":            nil,
	} {
		h := testHello()
		h.Environ = environ
		if _, err := forward(t, ts.sock, h, nil, io.Discard, io.Discard); !errors.Is(err, owner.ErrNoOwner) {
			t.Errorf("%s: a client whose environment is not its key's: %v, want ErrNoOwner", name, err)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the handler ran %d times for clients of another key", n)
	}
	// The same server still serves its own key.
	if code, err := forward(t, ts.sock, testHello(), nil, io.Discard, io.Discard); err != nil || code != 0 || ran.Load() != 1 {
		t.Fatalf("own key: (%d, %v), ran %d", code, err, ran.Load())
	}
}

func TestMalformedHello(t *testing.T) {
	var ran atomic.Int64
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		ran.Add(1)
		return 0, ""
	})
	c := dialRaw(t, ts.sock, []byte("garbage"))
	c.expect(owner.FrameFallback)

	// A first frame that is not a hello ends the connection.
	c = dialRaw(t, ts.sock, nil)
	c.send(owner.FrameStdin, []byte("x"))
	if typ, _, err := c.next(); err == nil {
		t.Fatalf("got frame %q after a non-hello first frame", typ)
	}
	if ran.Load() != 0 {
		t.Fatal("the handler ran for a malformed call")
	}
}

func TestPromptAnswer(t *testing.T) {
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		ans, err := r.Prompt(ctx, "Allow? [y/N] ")
		fmt.Fprintf(r.Stdout, "%q %v", ans, err)
		return 0, ""
	})
	c := dialRaw(t, ts.sock, owner.EncodeHello(testHello()))
	c.expect(owner.FrameStarted)
	p := c.expect(owner.FrameTTYPrompt)
	if len(p) < 4 || string(p[4:]) != "Allow? [y/N] " {
		t.Fatalf("prompt = %q", p)
	}
	c.send(owner.FrameTTYAnswer, append(p[:4:4], "yes"...)) // the prompt's id, then the line
	if p := c.expect(owner.FrameStdout); string(p) != `"yes" <nil>` {
		t.Fatalf("handler got %s", p)
	}
	if code := exitCode(c.expect(owner.FrameExit)); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestPromptWithoutAnswer(t *testing.T) {
	res := make(chan error, 1)
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		var err error
		if r.Hello.Args[0] == "timeout" {
			pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, err = r.Prompt(pctx, "?")
		} else {
			_, err = r.Prompt(ctx, "?")
		}
		res <- err
		return 0, ""
	})
	t.Run("prompt's context ends", func(t *testing.T) {
		c := dialRaw(t, ts.sock, owner.EncodeHello(testHello("timeout")))
		c.expect(owner.FrameStarted)
		c.expect(owner.FrameTTYPrompt)
		if err := recvTimeout(t, res, "Prompt to return"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Prompt = %v, want its context's error", err)
		}
		c.expect(owner.FrameExit)
	})
	t.Run("client goes away", func(t *testing.T) {
		c := dialRaw(t, ts.sock, owner.EncodeHello(testHello("gone")))
		c.expect(owner.FrameStarted)
		c.expect(owner.FrameTTYPrompt)
		c.conn.Close()
		if err := recvTimeout(t, res, "Prompt to return"); err == nil {
			t.Fatal("Prompt returned no error for a client that went away")
		}
	})
}

// TestPromptWithoutTerminal runs owner.Forward in a process without a controlling terminal
// (a session of its own), so that it cannot open /dev/tty: the prompt gets an empty answer.
func TestPromptWithoutTerminal(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "owners", "key.sock")
	childEnv := append(os.Environ(), roleEnv+"=client", sockEnv+"="+sock)
	childKey, err := owner.CurrentKey(childEnv) // the client child's key
	if err != nil {
		t.Fatal(err)
	}
	startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		ans, err := r.Prompt(ctx, "Allow? [y/N] ")
		fmt.Fprintf(r.Stdout, "answer=%q err=%v", ans, err)
		return 9, ""
	}, func(s *Server) { s.Path, s.Key = sock, childKey })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = childEnv
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 9 {
		t.Fatalf("client: %v, stderr %q", err, stderr.String())
	}
	if string(out) != `answer="" err=<nil>` {
		t.Fatalf("client's stdout = %q", out)
	}
}

func TestClientGoneCancelsHandler(t *testing.T) {
	running := make(chan struct{}, 1)
	cancelled := make(chan bool, 1)
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		running <- struct{}{}
		select {
		case <-ctx.Done():
			cancelled <- true
		case <-time.After(wait):
			cancelled <- false
		}
		return 130, ""
	})
	t.Run("connection closed", func(t *testing.T) {
		c := dialRaw(t, ts.sock, owner.EncodeHello(testHello()))
		c.expect(owner.FrameStarted)
		recvTimeout(t, running, "the handler to run")
		c.conn.Close()
		if !recvTimeout(t, cancelled, "the handler to end") {
			t.Fatal("the handler's context was not cancelled when its client went away")
		}
	})
	t.Run("signal", func(t *testing.T) {
		c := dialRaw(t, ts.sock, owner.EncodeHello(testHello()))
		c.expect(owner.FrameStarted)
		recvTimeout(t, running, "the handler to run")
		c.send(owner.FrameSignal, []byte{byte(syscall.SIGINT)})
		if !recvTimeout(t, cancelled, "the handler to end") {
			t.Fatal("the handler's context was not cancelled by a signal")
		}
		if code := exitCode(c.expect(owner.FrameExit)); code != 130 {
			t.Fatalf("exit %d", code)
		}
	})
}

func TestServeEndsWhenIdle(t *testing.T) {
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) { return 0, "" },
		func(s *Server) { s.KeepAlive = func() time.Duration { return 100 * time.Millisecond } })
	if err := ts.waitServe(t); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if _, err := os.Lstat(ts.sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket is still there after Serve: %v", err)
	}
	if _, err := forward(t, ts.sock, testHello(), nil, io.Discard, io.Discard); !errors.Is(err, owner.ErrNoOwner) {
		t.Fatalf("Forward after Serve: %v", err)
	}
}

func TestServeStaysWhileACallRuns(t *testing.T) {
	running := make(chan struct{})
	release := make(chan struct{})
	var ctxErr atomic.Value
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		close(running)
		select {
		case <-release:
		case <-ctx.Done():
			ctxErr.Store(ctx.Err())
		}
		return 4, ""
	}, func(s *Server) { s.KeepAlive = func() time.Duration { return 50 * time.Millisecond } })
	res := make(chan int, 1)
	go func() {
		code, _ := owner.Forward(ts.sock, testHello(), nil, io.Discard, io.Discard)
		res <- code
	}()
	recvTimeout(t, running, "the handler to run")
	// Many keep-alive periods pass while the call runs; the owner must stay.
	deadline := time.Now().Add(6 * 50 * time.Millisecond)
	for time.Now().Before(deadline) {
		if !ts.serving() {
			t.Fatal("Serve returned while a call was running")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	if code := recvTimeout(t, res, "Forward"); code != 4 {
		t.Fatalf("Forward code %d", code)
	}
	if e := ctxErr.Load(); e != nil {
		t.Fatalf("the running call was cancelled: %v", e)
	}
	if err := ts.waitServe(t); err != nil {
		t.Fatalf("Serve = %v", err)
	}
}

func TestKeepAliveIsReadAgain(t *testing.T) {
	t.Parallel() // the owner looks again every 2s at this keep-alive
	var keep atomic.Int64
	keep.Store(int64(time.Hour))
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		keep.Store(int64(time.Millisecond)) // as a call that changes the configuration
		return 0, ""
	}, func(s *Server) { s.KeepAlive = func() time.Duration { return time.Duration(keep.Load()) } })
	if !ts.serving() {
		t.Fatal("Serve returned at once")
	}
	if _, err := forward(t, ts.sock, testHello(), nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := ts.waitServe(t); err != nil {
		t.Fatalf("Serve = %v", err)
	}
}

func TestServeEndsWhenContextEnds(t *testing.T) {
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) { return 0, "" })
	ts.cancel()
	if err := ts.waitServe(t); err != nil {
		t.Fatalf("Serve = %v, want nil after its context ended", err)
	}
	if _, err := os.Lstat(ts.sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket is still there: %v", err)
	}
}

func TestServeEndsWhenSocketRemoved(t *testing.T) {
	t.Parallel() // the owner looks at its socket every 2s at this keep-alive
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) { r.Started(); return 0, "" })
	if _, err := forward(t, ts.sock, testHello(), nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(ts.sock); err != nil {
		t.Fatal(err)
	}
	if err := ts.waitServe(t); err != nil {
		t.Fatalf("Serve = %v", err)
	}
}

func TestServeEndsWhenSocketReplaced(t *testing.T) {
	t.Parallel() // the owner looks at its socket every 2s at this keep-alive
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) { return 0, "" })
	other := ts.sock + ".other"
	if err := os.WriteFile(other, []byte("another owner's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, ts.sock); err != nil {
		t.Fatal(err)
	}
	if err := ts.waitServe(t); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	// What replaced the socket is not this owner's to remove.
	if b, err := os.ReadFile(ts.sock); err != nil || string(b) != "another owner's" {
		t.Fatalf("the replacement was touched: %q, %v", b, err)
	}
}

func TestListenPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "owners")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) { r.Started(); return 0, "" },
		func(s *Server) { s.Path = filepath.Join(dir, "key.sock") })
	st, err := os.Lstat(ts.sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket of mode 0600", st.Mode())
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode %v (%v), want 0700", st.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the socket dir holds %v, want only the socket", entries)
	}
	if _, err := forward(t, ts.sock, testHello(), nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	// A directory that Listen makes is private too.
	ts2 := startServer(t, func(ctx context.Context, r *Request) (int, string) { return 0, "" })
	if st, err := os.Stat(filepath.Dir(ts2.sock)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("new socket dir mode %v (%v), want 0700", st.Mode(), err)
	}
	if st, err := os.Lstat(ts2.sock); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v (%v), want 0600", st.Mode(), err)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	for _, kind := range []string{"socket", "file"} {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "owners")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(dir, "key.sock")
			if kind == "socket" {
				// The socket of an owner that died: the file is there, nobody listens.
				ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
				if err != nil {
					t.Fatal(err)
				}
				ln.SetUnlinkOnClose(false)
				ln.Close()
				if _, err := owner.Forward(sock, testHello(), nil, io.Discard, io.Discard); !errors.Is(err, owner.ErrNoOwner) {
					t.Fatalf("the stale socket answers: %v", err)
				}
			} else if err := os.WriteFile(sock, []byte("junk"), 0o600); err != nil {
				t.Fatal(err)
			}
			ts := startServer(t, func(ctx context.Context, r *Request) (int, string) { r.Started(); return 11, "" },
				func(s *Server) { s.Path = sock })
			if code, err := forward(t, ts.sock, testHello(), nil, io.Discard, io.Discard); err != nil || code != 11 {
				t.Fatalf("Forward after replacing a stale socket = (%d, %v)", code, err)
			}
			if st, err := os.Lstat(sock); err != nil || st.Mode()&os.ModeSocket == 0 {
				t.Fatalf("no socket at the path: %v", err)
			}
		})
	}
}

func TestLongSocketPath(t *testing.T) {
	dir := t.TempDir()
	for len(dir) < 150 {
		dir = filepath.Join(dir, "a-rather-long-directory-name")
	}
	sock := filepath.Join(dir, "owners", "0123456789abcdef.sock")
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		fmt.Fprint(r.Stdout, "long")
		return 12, ""
	}, func(s *Server) { s.Path = sock })
	var out bytes.Buffer
	if code, err := forward(t, ts.sock, testHello(), nil, &out, io.Discard); err != nil || code != 12 || out.String() != "long" {
		t.Fatalf("Forward on a %d-byte path = (%d, %v, %q)", len(sock), code, err, out.String())
	}
	// The socket is at the long path itself and is removed from there.
	if st, err := os.Lstat(sock); err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("no socket at %s: %v", sock, err)
	}
	ts.cancel()
	ts.waitServe(t)
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the long-path socket was not removed: %v", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	const n = 8
	var inside, most atomic.Int64
	all := make(chan struct{})
	var arrived atomic.Int64
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		now := inside.Add(1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		if arrived.Add(1) == n {
			close(all)
		}
		select { // every call is in at once before any ends
		case <-all:
		case <-ctx.Done():
		case <-time.After(wait):
		}
		inside.Add(-1)
		fmt.Fprint(r.Stdout, r.Hello.Args[0])
		i, _ := strconv.Atoi(r.Hello.Args[0])
		return i, ""
	})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			code, err := owner.Forward(ts.sock, testHello(strconv.Itoa(i)), nil, &out, io.Discard)
			if err != nil || code != i || out.String() != strconv.Itoa(i) {
				errs <- fmt.Errorf("call %d = (%d, %v, %q)", i, code, err, out.String())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if most.Load() != n {
		t.Fatalf("at most %d calls ran at once, want %d", most.Load(), n)
	}
}

// --- Start ----------------------------------------------------------------------------

// startEnv is the environment of an owner the test binary plays.
func startEnv(role, sock, pidFile string) []string {
	return append(os.Environ(), roleEnv+"="+role, sockEnv+"="+sock, pidFileEnv+"="+pidFile)
}

func readPids(t *testing.T, pidFile string) []int {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pid, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatalf("pid file: %q", sc.Text())
		}
		pids = append(pids, pid)
	}
	return pids
}

// killOwners kills, at the end of the test, every process in pidFile that is still a child
// of this one (Start reaps those it kills; those it released are ours to end).
func killOwners(t *testing.T, pidFile string) {
	t.Cleanup(func() {
		for _, pid := range readPids(t, pidFile) {
			var ws syscall.WaitStatus
			wpid, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			if err != nil || wpid == pid {
				continue // not our child (any more), or already gone and now reaped
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			_, _ = syscall.Wait4(pid, &ws, 0, nil)
		}
	})
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

type startCase struct {
	sock, log, pidFile, exe string
}

func newStartCase(t *testing.T) startCase {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := startCase{sock: filepath.Join(dir, "owners", "key.sock"), log: filepath.Join(dir, "owners", "key.log"),
		pidFile: filepath.Join(dir, "pids"), exe: exe}
	killOwners(t, c.pidFile)
	return c
}

// start runs Start, giving up (with an error) if it does not return in time.
func (c startCase) start(role string, timeout time.Duration) error {
	ch := make(chan error, 1)
	go func() {
		ch <- Start(c.sock, c.exe, []string{"owner-serve", "--socket", c.sock}, startEnv(role, c.sock, c.pidFile), c.log, timeout)
	}()
	select {
	case err := <-ch:
		return err
	case <-time.After(timeout + wait):
		return errors.New("Start did not return")
	}
}

func TestStartOneOwnerForConcurrentStarts(t *testing.T) {
	c := newStartCase(t)
	const n = 10
	errs := make(chan error, n)
	gate := make(chan struct{})
	for i := 0; i < n; i++ {
		go func() {
			<-gate
			errs <- c.start("owner", wait)
		}()
	}
	close(gate)
	for i := 0; i < n; i++ {
		if err := recvTimeout(t, errs, "Start"); err != nil {
			t.Errorf("Start: %v", err)
		}
	}
	pids := readPids(t, c.pidFile)
	if len(pids) != 1 {
		t.Fatalf("%d concurrent Starts started %d owners (%v), want 1", n, len(pids), pids)
	}
	// The owner serves, from its own session.
	var out bytes.Buffer
	code, err := forward(t, c.sock, testHello(), nil, &out, io.Discard)
	if err != nil || code != 42 || out.String() != strconv.Itoa(pids[0]) {
		t.Fatalf("Forward to the started owner = (%d, %v, %q), want 42 from pid %d", code, err, out.String(), pids[0])
	}
	if sid, err := unix.Getsid(pids[0]); err != nil || sid != pids[0] {
		t.Errorf("the owner's session is %d (%v), want a session of its own", sid, err)
	}
	if st, err := os.Stat(filepath.Dir(c.sock)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the socket dir: %v, %v", st.Mode(), err)
	}
	// A later Start finds the owner.
	if err := c.start("owner", wait); err != nil {
		t.Fatal(err)
	}
	if pids := readPids(t, c.pidFile); len(pids) != 1 {
		t.Fatalf("a Start with an owner running started another: %v", pids)
	}
}

func TestStartOwnerExitsWithoutReady(t *testing.T) {
	c := newStartCase(t)
	err := c.start("exit", wait)
	if err == nil || !strings.Contains(err.Error(), "exited while starting") || !strings.Contains(err.Error(), c.log) {
		t.Fatalf("Start = %v, want that the owner exited while starting, with its log", err)
	}
	b, _ := os.ReadFile(c.log)
	if !strings.Contains(string(b), "test owner: exiting without a word") {
		t.Fatalf("the owner's output is not in its log: %q", b)
	}
	for _, pid := range readPids(t, c.pidFile) {
		if alive(pid) {
			t.Errorf("owner %d is still there", pid)
		}
	}
}

func TestStartOwnerReadyError(t *testing.T) {
	c := newStartCase(t)
	err := c.start("fail", wait)
	if err == nil || !strings.Contains(err.Error(), "test owner: cannot serve here") {
		t.Fatalf("Start = %v, want the owner's reason", err)
	}
	pids := readPids(t, c.pidFile)
	if len(pids) != 1 {
		t.Fatalf("owners started: %v", pids)
	}
	if alive(pids[0]) {
		t.Fatalf("the owner that could not serve (%d) was left running", pids[0])
	}
}

func TestStartOwnerNeverReady(t *testing.T) {
	c := newStartCase(t)
	err := c.start("hang", 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not start within") {
		t.Fatalf("Start = %v, want a timeout", err)
	}
	for _, pid := range readPids(t, c.pidFile) {
		if alive(pid) {
			t.Errorf("the owner that never got ready (%d) was left running", pid)
		}
	}
}

func TestStartMissingBinary(t *testing.T) {
	c := newStartCase(t)
	c.exe = filepath.Join(t.TempDir(), "no-such-binary")
	if err := c.start("owner", wait); err == nil || !strings.Contains(err.Error(), "no-such-binary") {
		t.Fatalf("Start of a missing binary = %v", err)
	}
}

// --- Forget ---------------------------------------------------------------------------

func TestServerForget(t *testing.T) {
	type forgot struct{ backend, session string }
	got := make(chan forgot, 4)
	var ran atomic.Int64
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) { ran.Add(1); return 0, "" },
		func(s *Server) { s.Forget = func(b, sess string) { got <- forgot{b, sess} } })
	owner.Forget(filepath.Dir(ts.sock), "docker", "s1")
	if f := recvTimeout(t, got, "Forget"); f != (forgot{"docker", "s1"}) {
		t.Fatalf("Forget(%q, %q), want docker s1", f.backend, f.session)
	}
	owner.Forget(filepath.Dir(ts.sock), "kubernetes", "")
	if f := recvTimeout(t, got, "Forget"); f != (forgot{"kubernetes", ""}) {
		t.Fatalf("Forget(%q, %q), want kubernetes and every session", f.backend, f.session)
	}
	// A malformed forget is answered and ignored.
	c := dialRaw(t, ts.sock, nil)
	c.send(owner.FrameForget, []byte("junk"))
	c.expect(owner.FrameExit)
	select {
	case f := <-got:
		t.Fatalf("a malformed forget reached Forget: %+v", f)
	default:
	}
	if ran.Load() != 0 {
		t.Fatal("a forget ran the handler")
	}
	if !ts.serving() {
		t.Fatal("the owner stopped serving after a forget")
	}
	if _, err := forward(t, ts.sock, testHello(), nil, io.Discard, io.Discard); err != nil || ran.Load() != 1 {
		t.Fatalf("a call after forgets: %v, ran %d", err, ran.Load())
	}
}

func TestServerWithoutForget(t *testing.T) {
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) { return 0, "" })
	c := dialRaw(t, ts.sock, nil)
	c.send(owner.FrameForget, owner.EncodeForget("docker", "s1"))
	if code := exitCode(c.expect(owner.FrameExit)); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// --- known bugs -----------------------------------------------------------------------
// These tests describe behaviour the code does not have yet. Each is skipped with the
// reason; remove the Skip once the bug is fixed.

// A handler that stops reading stdin while the client sends more than stdinQueueMax leaves
// the connection's reader blocked in stdinQueue.put, so it never sees the client go away
// TestStdinCreditKeepsCancelVisible: the client may send only what the owner granted, so
// however much input a command leaves unread, the connection's reader still sees the client
// go (and input beyond the grant ends the input rather than blocking that reader).
func TestStdinCreditKeepsCancelVisible(t *testing.T) {
	cancelled := make(chan bool, 1)
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		_, _ = r.Stdin.Read(make([]byte, 1)) // then stops reading
		select {
		case <-ctx.Done():
			cancelled <- true
		case <-time.After(wait):
			cancelled <- false
		}
		return 0, ""
	})
	c := dialRaw(t, ts.sock, owner.EncodeHello(testHello()))
	c.expect(owner.FrameStarted)
	p := c.expect(owner.FrameWantStdin)
	if len(p) != 4 {
		t.Fatalf("stdin request %q: want a 4-byte grant", p)
	}
	grant := int(binary.BigEndian.Uint32(p))
	if grant <= 0 || grant > stdinWindow {
		t.Fatalf("grant %d; want 1..%d", grant, stdinWindow)
	}
	// The grant and 4 MiB more: more than was granted must not stop the reader.
	chunk := make([]byte, 1<<20)
	for sent := 0; sent < grant+4<<20; sent += len(chunk) {
		if err := owner.WriteFrame(c.conn, owner.FrameStdin, chunk); err != nil {
			break
		}
	}
	c.conn.Close()
	if !recvTimeout(t, cancelled, "the handler") {
		t.Fatal("the handler was not cancelled when its client went away with input pending")
	}
}

// TestLateAnswerIsDropped: an answer typed after its prompt gave up does not answer the
// next prompt.
func TestLateAnswerIsDropped(t *testing.T) {
	ts := startServer(t, func(ctx context.Context, r *Request) (int, string) {
		r.Started()
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, _ = r.Prompt(pctx, "first?")
		cancel()
		fmt.Fprint(r.Stdout, "first gave up")
		pctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
		a, err := r.Prompt(pctx, "second?")
		fmt.Fprintf(r.Stdout, "%q %v", a, err)
		return 0, ""
	})
	c := dialRaw(t, ts.sock, owner.EncodeHello(testHello()))
	c.expect(owner.FrameStarted)
	first := c.expect(owner.FrameTTYPrompt)
	c.expect(owner.FrameStdout)
	c.send(owner.FrameTTYAnswer, append(first[:4:4], "yes"...)) // the first question's answer, late
	second := c.expect(owner.FrameTTYPrompt)
	if string(second[:4]) == string(first[:4]) {
		t.Fatal("two prompts with one id")
	}
	c.send(owner.FrameTTYAnswer, append(second[:4:4], "no"...))
	if p := c.expect(owner.FrameStdout); string(p) != `"no" <nil>` {
		t.Fatalf("the second prompt returned %s; want the answer typed for it", p)
	}
}
