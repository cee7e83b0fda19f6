package channel_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// localSession opens a local session in a fresh state directory.
func localSession(t *testing.T, mut func(*config.Config)) sandbox.Session {
	t.Helper()
	dir := t.TempDir()
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = dir
	if mut != nil {
		mut(cfg)
	}
	b, err := local.New(cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(dir, "state"), Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + dir}}))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := b.Open(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// serve runs an owner for sess on a socket and returns its path.
func serve(t *testing.T, sess sandbox.Session, keep time.Duration) (string, <-chan struct{}) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "o.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}) // closed when Serve returns
	go func() {
		defer close(done)
		if err := channel.Serve(ctx, ln, sess, channel.OwnerOptions{Hello: channel.OwnerHello{Backend: "local", Session: "s"}, KeepAlive: keep}); err != nil {
			t.Errorf("Serve = %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return sock, done
}

func dial(t *testing.T, sock string) *channel.Remote {
	t.Helper()
	r, err := channel.DialOwner(t.Context(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRemoteSession(t *testing.T) {
	sock, _ := serve(t, localSession(t, nil), time.Minute)
	r := dial(t, sock)
	ctx := t.Context()
	var live bytes.Buffer
	res, err := r.Exec(ctx, sandbox.Command{Script: "cd /tmp; export R=1; cat; echo err >&2", Stdin: strings.NewReader("from stdin\n"), Stdout: &live})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "from stdin\n" || res.Stderr != "err\n" || res.Cwd != "/tmp" || live.String() != "from stdin\n" {
		t.Errorf("Exec through the owner = %+v, live %q", res, live.String())
	}
	// A second client sees the first one's state.
	r2 := dial(t, sock)
	if res, err := r2.Exec(ctx, sandbox.Command{Script: "pwd; echo $R"}); err != nil || res.Stdout != "/tmp\n1\n" {
		t.Errorf("second client: %+v, %v", res, err)
	}
	if err := r.WriteFile(ctx, "/tmp/hermes-remote-test", []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove("/tmp/hermes-remote-test")
	if b, err := r.ReadFile(ctx, "/tmp/hermes-remote-test", 0, 0); err != nil || string(b) != "data" {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
	if _, err := r.PollJob(ctx, "job-nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("PollJob(unknown) = %v; want ErrNotFound across the socket", err)
	}
	// Cancelling the caller's context kills the command.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	res, err = r.Exec(cctx, sandbox.Command{Script: "sleep 30"})
	if !errors.Is(err, context.Canceled) || res == nil || !res.Interrupted {
		t.Errorf("cancelled Exec = %+v, %v; want interrupted and context.Canceled", res, err)
	}
}

func TestOwnerExitsWhenIdle(t *testing.T) {
	sock, done := serve(t, localSession(t, nil), 300*time.Millisecond)
	r := dial(t, sock)
	if _, err := r.Exec(t.Context(), sandbox.Command{Script: "true"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("the owner exited while a client was connected")
	case <-time.After(time.Second):
	}
	r.Close()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the owner did not exit after keep_alive without clients")
	}
}

func TestJobTimeout(t *testing.T) {
	sess := localSession(t, func(c *config.Config) { c.Terminal.JobTimeout = 500 * time.Millisecond })
	jr := sess.(sandbox.JobRunner)
	ctx := t.Context()
	st, err := jr.StartJob(ctx, sandbox.Command{Script: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := jr.WaitJob(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out.Running || out.ExitCode == nil || *out.ExitCode != 124 {
		t.Errorf("job past terminal.job_timeout = %+v; want ended with 124", out.JobStatus)
	}
}
