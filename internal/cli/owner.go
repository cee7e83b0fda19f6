package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// A session owner is a detached `hermes-sandbox __owner` process that holds one session's
// warm backend session and serves it on a unix socket (internal/channel), so a fresh CLI
// process costs a socket round trip instead of a `docker exec` or an SSH handshake. The
// first CLI call for a session starts it (under a lock, so simultaneous first calls start
// one); it exits after terminal.keep_alive without a client. A changed configuration or
// binary makes a new owner: the old one is retired and finishes what it runs.

// ownerPaths are the owner's socket, start lock and log, in the 0700 owners directory of the
// state directory.
func ownerPaths(stateDir, backend, session string) (sock, lock, logf string) {
	sum := sha256.Sum256([]byte(backend + "\x00" + session))
	base := filepath.Join(stateDir, "owners", hex.EncodeToString(sum[:8]))
	return base + ".sock", base + ".lock", base + ".log"
}

// maxSocketPath is the longest unix socket path Linux accepts (sun_path, less the NUL).
const maxSocketPath = 107

// ownerFingerprint identifies what an owner was started with: the configuration, the values
// of passed-through variables, the secrets and this binary. An owner with another
// fingerprint is not used.
func (a *app) ownerFingerprint(cfg *config.Config, backend string) string {
	h := sha256.New()
	cj, _ := json.Marshal(cfg)
	h.Write(cj)
	fmt.Fprintf(h, "\x00%s\x00%s\x00", backend, a.configFlag)
	pass := slices.Concat(cfg.Terminal.EnvPassthrough, cfg.Docker.EnvPassthrough)
	for _, kv := range sandbox.FilterEnv(a.environ, pass) {
		fmt.Fprintf(h, "%s\x00", kv)
	}
	for _, s := range a.secrets(cfg) {
		fmt.Fprintf(h, "%s\x00", s)
	}
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			fmt.Fprintf(h, "%s\x00%d\x00%d", exe, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// openOwnedSession is openSession through the session's owner, starting it if needed. With
// terminal.keep_alive 0, or when no owner can start, it opens the backend in this process.
func (a *app) openOwnedSession(ctx context.Context, cfg *config.Config, name string) (context.Context, sandbox.Backend, sandbox.Session, func(), error) {
	if cfg.Terminal.KeepAlive <= 0 {
		return a.openSession(ctx, cfg, name)
	}
	backend, err := a.backendName(ctx, cfg)
	if err != nil {
		return ctx, nil, nil, nil, err
	}
	if !a.registry.Has(backend) {
		return a.openSession(ctx, cfg, name)
	}
	inner, err := a.ownedBackend(ctx, cfg, backend, name)
	if err != nil {
		if ctx.Err() != nil {
			return ctx, nil, nil, nil, err
		}
		fmt.Fprintf(a.stderr, "hermes-sandbox: note: no session owner (%v); running this command without one\n", err)
		return a.openSession(ctx, cfg, name)
	}
	return a.openSessionOn(ctx, cfg, inner, name)
}

// ownedBackend returns the named session's owner as a backend, starting the owner if none
// runs. The caller wraps it in the gate.
func (a *app) ownedBackend(ctx context.Context, cfg *config.Config, backend, session string) (sandbox.Backend, error) {
	if err := sandbox.ValidateSessionName(session); err != nil {
		return nil, &sandbox.Error{Backend: backend, Op: "open", ID: session, Err: err}
	}
	sock, lockPath, logPath := ownerPaths(cfg.StateDir(), backend, session)
	if len(sock) > maxSocketPath {
		return nil, fmt.Errorf("the owner socket path %s is longer than %d bytes: set a shorter terminal.state_dir, or terminal.keep_alive 0", sock, maxSocketPath)
	}
	fp := a.ownerFingerprint(cfg, backend)
	if r := dialFresh(ctx, sock, fp); r != nil {
		return channel.RemoteBackend{R: r}, nil
	}
	dir := filepath.Dir(sock)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	unlock, err := flockCtx(ctx, lockPath)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another process may have started it while this one waited for the lock.
	if r := dialFresh(ctx, sock, fp); r != nil {
		return channel.RemoteBackend{R: r}, nil
	}
	os.Remove(sock) // stale, or a retired owner's
	if err := a.startOwner(ctx, backend, session, sock, fp, logPath); err != nil {
		return nil, err
	}
	r, err := channel.DialOwner(ctx, sock)
	if err != nil {
		return nil, err
	}
	return channel.RemoteBackend{R: r}, nil
}

// dialFresh connects to the owner on sock if it runs with fingerprint fp; an owner with
// another fingerprint is retired.
func dialFresh(ctx context.Context, sock, fp string) *channel.Remote {
	r, err := channel.DialOwner(ctx, sock)
	if err != nil {
		return nil
	}
	if r.Hello().Fingerprint == fp {
		return r
	}
	_ = r.Retire()
	r.Close()
	return nil
}

// flockCtx takes an exclusive lock on path, giving up when ctx ends.
func flockCtx(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ownerStartTimeout bounds an owner's start (it may create a container or connect by SSH).
const ownerStartTimeout = 3 * time.Minute

// startOwner starts a detached owner and waits until it listens, or says why it cannot.
func (a *app) startOwner(ctx context.Context, backend, session, sock, fp, logPath string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"__owner", "--sandbox", backend, "--session", session, "--socket", sock, "--fingerprint", fp}
	if a.configFlag != "" {
		args = append(args, "--config", a.configFlag)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	cmd := exec.Command(exe, args...)
	cmd.Env = a.environ
	cmd.Stderr = logf
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return fmt.Errorf("start the session owner: %w", err)
	}
	go cmd.Wait() // reap it if it exits while this process lives
	type answer struct {
		b   []byte
		err error
	}
	got := make(chan answer, 1)
	go func() {
		b, err := io.ReadAll(pr)
		got <- answer{b, err}
	}()
	t := time.NewTimer(ownerStartTimeout)
	defer t.Stop()
	select {
	case ans := <-got:
		msg := string(bytes.TrimSpace(ans.b))
		if msg == "ready" {
			return nil
		}
		if msg == "" {
			tail, _ := os.ReadFile(logPath)
			msg = "it exited: " + strings.TrimSpace(string(tail[max(0, len(tail)-500):]))
		}
		return fmt.Errorf("the session owner did not start: %s", msg)
	case <-ctx.Done():
		cmd.Process.Kill()
		return ctx.Err()
	case <-t.C:
		cmd.Process.Kill()
		return fmt.Errorf("the session owner did not start within %s (see %s)", ownerStartTimeout, logPath)
	}
}

// ownerCmd is the detached owner process (started by startOwner, never by people).
func (a *app) ownerCmd() *cobra.Command {
	var session, sock, fp string
	cmd := &cobra.Command{
		Use:    "__owner",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ready := os.NewFile(3, "ready")
			err := a.runOwner(cmd.Context(), session, sock, fp, ready)
			if err != nil && ready != nil {
				fmt.Fprintln(ready, err)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "session to own")
	cmd.Flags().StringVar(&sock, "socket", "", "socket to listen on")
	cmd.Flags().StringVar(&fp, "fingerprint", "", "what the starter expects")
	return cmd
}

func (a *app) runOwner(ctx context.Context, session, sock, fp string, ready *os.File) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	b, err := a.openBackend(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	if got := a.ownerFingerprint(cfg, b.Name()); got != fp {
		return errors.New("the configuration changed while the owner started; run the command again")
	}
	sess, err := b.Open(ctx, session)
	if err != nil {
		return err
	}
	defer sess.Close()
	// Warm: start the helper (create the container, connect) before taking clients.
	if w, ok := sess.(interface {
		Client(context.Context) (*agent.Client, error)
	}); ok {
		if _, err := w.Client(ctx); err != nil {
			return err
		}
	}
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", sock, err)
	}
	ln.SetUnlinkOnClose(false)
	var mine unix.Stat_t
	_ = unix.Stat(sock, &mine)
	defer func() {
		// Remove the socket unless a newer owner has taken its place.
		var now unix.Stat_t
		if unix.Stat(sock, &now) == nil && now.Ino == mine.Ino {
			os.Remove(sock)
		}
	}()
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return err
	}
	if ready != nil {
		fmt.Fprintln(ready, "ready")
		ready.Close()
	}
	return channel.Serve(ctx, ln, sess, channel.OwnerOptions{
		Hello:     channel.OwnerHello{Backend: b.Name(), Session: session, Fingerprint: fp, Capabilities: b.Capabilities()},
		KeepAlive: cfg.Terminal.KeepAlive,
		Socket:    sock,
	})
}

// stopOwner retires the session's owner, if one runs, so that a removed session is not
// served from memory; it returns once the owner has let go of the socket.
func stopOwner(ctx context.Context, stateDir, backend, session string) {
	sock, _, _ := ownerPaths(stateDir, backend, session)
	r, err := channel.DialOwner(ctx, sock)
	if err != nil {
		return
	}
	_ = r.Retire()
	r.Close()
	os.Remove(sock)
}
