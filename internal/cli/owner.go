package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/internal/owner"
	"github.com/hermes-sandbox/hermes-sandbox/internal/owner/daemon"
)

// ownerStartTimeout bounds how long an exec waits for a new owner to listen.
const ownerStartTimeout = 10 * time.Second

// ownerCmd is the session owner, started by exec (see package owner); it is not for people.
func (a *app) ownerCmd() *cobra.Command {
	var sock string
	var keep time.Duration
	cmd := &cobra.Command{
		Use:    "owner-serve --socket PATH",
		Short:  "Serve exec calls with warm sessions (started by exec; see terminal.keep_alive)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.serveOwner(cmd.Context(), sock, keep)
		},
	}
	cmd.Flags().StringVar(&sock, "socket", "", "the owner's socket")
	cmd.Flags().DurationVar(&keep, "keep-alive", 10*time.Minute, "idle time before the owner exits")
	return cmd
}

func (a *app) serveOwner(ctx context.Context, sock string, keep time.Duration) error {
	if sock == "" || keep <= 0 {
		err := usagef("owner-serve: needs --socket and a positive --keep-alive")
		daemon.Ready(err)
		return err
	}
	key, err := owner.CurrentKey(a.environ)
	if err != nil {
		daemon.Ready(err)
		return err
	}
	logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	pool := newSessionPool(keep, logger)
	srv := &daemon.Server{Path: sock, Key: key, KeepAlive: pool.keepAlive, Logger: logger, Forget: pool.forget,
		Handler: func(ctx context.Context, r *daemon.Request) (int, string) { return a.serveCall(ctx, r, pool) }}
	if err := srv.Listen(); err != nil {
		daemon.Ready(err)
		return err
	}
	daemon.Ready(nil)
	logger.Info("owner: serving", "socket", sock, "pid", os.Getpid(), "keep_alive", keep)
	rctx, stopReap := context.WithCancel(ctx)
	reaped := make(chan struct{})
	go func() { defer close(reaped); pool.reap(rctx) }()
	err = srv.Serve(ctx)
	stopReap()
	<-reaped
	pool.close()
	logger.Info("owner: exiting", "socket", sock)
	return err
}

// serveCall runs one client's exec as a run of its own: its environment, streams and
// terminal, this owner's warm sessions.
func (a *app) serveCall(ctx context.Context, r *daemon.Request, pool *sessionPool) (int, string) {
	if !owner.IsExec(r.Hello.Args) {
		return 0, "an owner serves exec only"
	}
	c := &app{stdin: r.Stdin, stdout: r.Stdout, stderr: r.Stderr, environ: r.Hello.Environ,
		registry: a.registry, req: r, pool: pool}
	code := c.run(ctx, r.Hello.Args)
	return code, c.declined
}

// useOwner decides, in an exec that has read its configuration, where the call runs. In an
// owner, it declines when owners are switched off (the client then runs the call itself).
// In the binary, it hands the call to the session's owner, starting one if needed; handled
// is false when the call is to run in this process.
func (a *app) useOwner(cfg *config.Config) (code int, handled bool) {
	if a.req != nil {
		if cfg.Terminal.KeepAlive <= 0 {
			a.declined = "terminal.keep_alive is 0"
			a.pool.setKeepAlive(0)
			return 0, true
		}
		if a.req.Hello.TTY && a.selectedName(cfg) == "local" { // auto is never local
			// A local command run by the exec itself shares its terminal (sudo, ssh and git
			// ask there); the owner has none to give it.
			a.declined = "a local command of a caller with a terminal runs in the caller's process"
			return 0, true
		}
		a.pool.setKeepAlive(cfg.Terminal.KeepAlive)
		a.req.Started()
		return 0, false
	}
	// Off Linux there are no owners (owner.Supported): every exec runs in its own process.
	if !owner.Supported || !a.owners || cfg.Terminal.KeepAlive <= 0 {
		return 0, false
	}
	h, err := owner.NewHello(a.args, a.environ, isTerminal(a.stdin))
	var sock string
	if err == nil {
		sock, err = owner.SocketPath(a.environ, h.Key)
	}
	if err == nil {
		keep := cfg.Terminal.KeepAlive
		if !secondCall(sock, keep) || !roomForOwner(filepath.Dir(sock)) || recent(failedMark(sock), keep) {
			return 0, false
		}
		err = startOwner(sock, a.environ, keep)
	}
	if err == nil {
		code, err = owner.Forward(sock, h, a.stdin, a.stdout, a.stderr)
		switch {
		case err == nil:
			return code, true
		case !errors.Is(err, owner.ErrNoOwner):
			fmt.Fprintf(a.stderr, "hermes-sandbox: %v\n", err)
			return code, true
		}
	}
	fmt.Fprintf(a.stderr, "hermes-sandbox: warning: no session owner (%v); this exec runs in its own process (terminal.keep_alive 0 stops trying)\n", err)
	return 0, false
}

// forgetInOwners tells the session owners that a session of backend was removed (session ""
// = all of them), so that none goes on serving it warm.
func (a *app) forgetInOwners(backend, session string) {
	if dir, err := owner.Dir(a.environ); err == nil {
		owner.Forget(dir, backend, session)
	}
}

// startOwner starts the owner for sock unless one answers there. A failure is noted beside
// the socket: the execs of the next keep_alive run in their own process without trying again.
func startOwner(sock string, environ []string, keep time.Duration) error {
	exe, err := os.Executable()
	if err == nil {
		err = daemon.Start(sock, exe, []string{"owner-serve", "--socket", sock, "--keep-alive", keep.String()},
			environ, strings.TrimSuffix(sock, ".sock")+".log", ownerStartTimeout)
	}
	if err != nil {
		_ = os.WriteFile(failedMark(sock), []byte(err.Error()+"\n"), 0o600)
		return err
	}
	os.Remove(failedMark(sock))
	return nil
}

func failedMark(sock string) string { return strings.TrimSuffix(sock, ".sock") + ".failed" }

// maxOwners bounds the session owners one user has at once; beyond it, an exec that would
// start another runs in its own process.
const maxOwners = 16

// secondCall reports whether an exec with this owner key already ran within keep; if not, it
// notes this one. An owner starts at the second exec with the same environment, so that a
// caller whose environment changes at every call (a request id in it) starts none: it would
// gain nothing and leave one idle owner per call.
func secondCall(sock string, keep time.Duration) bool {
	mark := strings.TrimSuffix(sock, ".sock") + ".seen"
	if recent(mark, keep) {
		return true
	}
	dir := filepath.Dir(sock)
	if owner.PrivateDir(dir) != nil {
		return false
	}
	// Old notes go as new ones come, looked for at most once a minute.
	stamp := filepath.Join(dir, ".pruned")
	if recent(stamp, time.Minute) {
		_ = os.WriteFile(mark, nil, 0o600)
		now := time.Now()
		_ = os.Chtimes(mark, now, now)
		return false
	}
	_ = os.WriteFile(stamp, nil, 0o600)
	now := time.Now()
	_ = os.Chtimes(stamp, now, now)
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".seen") {
				if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) >= keep {
					os.Remove(filepath.Join(dir, e.Name()))
				}
			}
		}
	}
	_ = os.WriteFile(mark, nil, 0o600)
	_ = os.Chtimes(mark, now, now)
	return false
}

// recent reports whether file p was written within d.
func recent(p string, d time.Duration) bool {
	fi, err := os.Stat(p)
	return err == nil && time.Since(fi.ModTime()) < d
}

// roomForOwner reports whether fewer than maxOwners owners answer in dir; sockets nobody
// answers on (an owner that was killed) are removed.
func roomForOwner(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	live := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sock") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		c, err := owner.Dial(p)
		if errors.Is(err, syscall.ECONNREFUSED) {
			os.Remove(p) // nobody listens: an owner that was killed
			continue
		}
		if err != nil {
			live++ // out of descriptors, say: count it, remove nothing
			continue
		}
		c.Close()
		live++
	}
	return live < maxOwners
}

// stdinIsTerminal reports whether the caller's standard input is a terminal.
func (a *app) stdinIsTerminal() bool {
	if a.req != nil {
		return a.req.Hello.StdinTTY
	}
	return isTerminal(a.stdin)
}

// approver is who answers approval prompts: the person at the caller's terminal, if any.
func (a *app) approver() (gate.Approver, func()) {
	if a.req != nil {
		if !a.req.Hello.TTY {
			return nil, func() {}
		}
		return remoteApprover{a.req}, func() {}
	}
	return terminalApprover()
}

// remoteApprover asks at the terminal of the process an owner serves.
type remoteApprover struct{ r *daemon.Request }

func (ra remoteApprover) Approve(ctx context.Context, req gate.Request) (gate.Decision, error) {
	line, err := ra.r.Prompt(ctx, approvalPrompt(req))
	if err != nil {
		return gate.Deny, err
	}
	return approvalAnswer(line), nil
}
