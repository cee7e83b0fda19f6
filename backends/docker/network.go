package docker

// Egress with docker.network allowlist. The session's container runs with network mode
// "none": the kernel gives it loopback and nothing else, so no direct connection, other port
// or DNS query can leave. The only way out is a relay: a second long-lived exec of the
// helper (`sandbox-agent relay --listen 127.0.0.1:3128`) accepts connections inside the
// container and carries each over its exec stream, multiplexed, to the filtering proxy in
// this process (internal/egress), which decides on the requested host and port, resolves
// the name itself and connects. HTTP(S)_PROXY in the container point ordinary tools at the
// relay. When no hermes-sandbox process holds the session, no relay runs and nothing
// listens: connections from background jobs fail until the next command starts one.
//
// Where the engine runs on this host (it always does: the helper itself is bind-mounted),
// the relay's connections skip the exec stream: the relay hands each accepted socket itself
// (SCM_RIGHTS, package egress/handoff) over a unix socket of the proxy in a directory
// mounted read-only into every allowlist container (egressSockDir), and the proxy serves
// the sandbox's socket directly, so a byte crosses loopback twice (client → proxy →
// server) and the relay carries none. The exec stream stays the relay's lifeline (it ends
// the relay when this process goes) and carries connections when the socket cannot be
// reached.
//
// The Engine API calls of this feature are all in this file (exec create and attach).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/mux"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

const (
	// relayGreeting bounds the wait for a new relay to listen. A relay of another process
	// on the same session may hold the port; the new one takes over when it frees.
	relayGreeting = 5 * time.Second
)

// network is the container's network mode.
func (b *Backend) network() config.NetworkMode { return b.cfg.EffectiveNetwork() }

// ObserveEgress installs the function that receives every connection the proxy decides on
// (the CLI writes them to the audit log). Call it before opening sessions.
func (b *Backend) ObserveEgress(fn func(sandbox.EgressEvent)) { b.egressObs.Set(fn) }

// Egress reports what docker enforces with its current settings.
func (b *Backend) Egress() sandbox.EgressReport {
	switch b.network() {
	case config.NetworkAllowlist:
		return b.overrides().Report("the container has no network (mode none); only this tool's filtering proxy, "+
			"reached through the session's relay, connects out, to the hosts in ", "")
	case config.NetworkOpen:
		return sandbox.EgressReport{Status: sandbox.EgressOpen,
			Detail: "open: docker.network is open, commands reach any host unfiltered (set docker.network allowlist to filter)"}
	}
	return sandbox.EgressReport{Status: sandbox.EgressNone, AppliesShared: true,
		Detail: "none: the container has no network (docker.network none); nothing is reachable, so no allowlist is needed"}
}

// overrides is the configured allowlist with each live session's change to it (`sessions
// network`), shared with the kubernetes backend (internal/egress).
func (b *Backend) overrides() egress.Overrides {
	o := egress.NewOverrides(filepath.Join(filepath.Dir(b.records.Dir), "egress"), Name, b.cfg.EgressAllow, b.opts.EgressAllow, b.log)
	o.Live = b.extra.Brokering.Live // the configuration as it is now, in a process that outlives a change
	return o
}

func (b *Backend) overridePath(session string) string { return b.overrides().Path(session) }

// SetSessionEgress changes a session's allowlist while it runs: allow adds hosts, deny
// removes them (a denied host stays denied even if the configuration lists it). The change
// applies to the session's next connection. It returns the allowlist now in force.
func (b *Backend) SetSessionEgress(ctx context.Context, session string, allow, deny []string) ([]string, error) {
	if err := b.overrides().CheckChange(Name, session, string(b.network()), allow, deny); err != nil {
		return nil, err
	}
	if _, err := b.inspect(ctx, b.containerName(session)); err != nil {
		if isNotFound(err) {
			return nil, &sandbox.Error{Backend: Name, Op: "network", ID: session, Err: fmt.Errorf("no such session: %w", sandbox.ErrNotFound)}
		}
		return nil, b.engineErr("network", session, err)
	}
	return b.overrides().Change(session, allow, deny)
}

// relay is a session's running relay exec and the proxy serving its streams.
type relay struct {
	execID string
	ms     *mux.Session
	proxy  *egress.Proxy
	sock   net.Listener // the proxy's unix socket for this relay; nil without one
	wg     sync.WaitGroup

	viaSock, viaStream atomic.Int64 // connections served from each path
}

// close ends the relay exec (its stdin closes, so the relay inside stops listening) and
// waits for every connection in progress.
func (r *relay) close() {
	r.ms.Close()
	if r.sock != nil {
		r.sock.Close()
	}
	r.proxy.Close()
	r.wg.Wait()
}

// startEgress starts the session's relay in container id, replacing an earlier one. It is
// called whenever a new helper starts, so the relay lives and dies with the session's
// channel in this process.
func (s *session) startEgress(ctx context.Context, id string) error {
	b := s.b
	s.stopEgress()
	if b.network() != config.NetworkAllowlist {
		return nil
	}
	r, err := b.startRelay(ctx, id, s.name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.relay = r
	s.mu.Unlock()
	return nil
}

// stopEgress stops the session's relay, if any.
func (s *session) stopEgress() {
	s.mu.Lock()
	r := s.relay
	s.relay = nil
	s.mu.Unlock()
	if r != nil {
		r.close()
	}
}

func (b *Backend) relayArgs(sock string) []string {
	args := append([]string{agentInCtr}, b.agent.Args...)
	args = append(args, "relay", "--listen", egress.RelayAddr)
	if sock != "" {
		args = append(args, "--unix", path.Join(egressSockInCtr, sock))
	}
	return args
}

// egressSockInCtr is where egressSockDir appears inside a container.
const egressSockInCtr = "/run/hermes-egress"

// egressSockDir is the host directory holding the proxies' unix sockets, mounted read-only
// into every allowlist container of this backend (warm-pool containers are made before their
// session is known, so it cannot be one directory per session). Its mode is 0311: nobody,
// the container's user included, can list it, so a sandbox reaches only the socket whose
// random name its own relay was given, never another session's proxy.
func (b *Backend) egressSockDir() (string, error) {
	dir := filepath.Join(filepath.Dir(b.records.Dir), "egress-sock")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", &sandbox.Error{Backend: Name, Op: "egress", Err: err}
	}
	if err := os.Chmod(dir, 0o311); err != nil {
		return "", &sandbox.Error{Backend: Name, Op: "egress", Err: err}
	}
	return dir, nil
}

// listenEgressSock opens a unix socket with a random name in egressSockDir that any user
// in the container may connect to. The directory's path can be longer than a socket
// address allows, so the socket is bound through /proc/self/fd.
func (b *Backend) listenEgressSock() (net.Listener, string, error) {
	dir, err := b.egressSockDir()
	if err != nil {
		return nil, "", err
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, "", err
	}
	defer d.Close()
	name := sandbox.RandomHex(5) + sandbox.RandomHex(5) + ".sock"
	addr := fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name)
	l, err := net.Listen("unix", addr)
	if err != nil {
		return nil, "", err
	}
	full := filepath.Join(dir, name)
	if err := os.Chmod(full, 0o666); err != nil {
		l.Close()
		os.Remove(full)
		return nil, "", err
	}
	// The listener would unlink its /proc path on close, which by then means nothing:
	// remove the real path instead.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	return &sockListener{Listener: l, path: full}, name, nil
}

// sockListener removes its socket file when closed.
type sockListener struct {
	net.Listener
	path string
}

func (l *sockListener) Close() error {
	err := l.Listener.Close()
	os.Remove(l.path)
	return err
}

// startRelay starts the relay exec and serves its streams with a proxy for session.
func (b *Backend) startRelay(ctx context.Context, id, session string) (*relay, error) {
	name := b.containerName(session)
	sock, sockName, err := b.listenEgressSock()
	if err != nil {
		// The exec stream alone still carries every connection, only slower.
		b.log.Warn("egress: no unix socket for the relay; connections go over the exec stream", "err", err)
		sock, sockName = nil, ""
	}
	ex, err := b.cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: b.relayArgs(sockName),
		AttachStdin: true, AttachStdout: true, AttachStderr: true})
	if err != nil {
		if sock != nil {
			sock.Close()
		}
		return nil, b.engineErr("egress relay", name, err)
	}
	hr, err := b.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		if sock != nil {
			sock.Close()
		}
		return nil, b.engineErr("egress relay", name, err)
	}
	log := b.log.With("container", name, "exec", shortID(ex.ID), "role", "egress relay")
	stderr := channel.NewLogWriter(log, slog.LevelWarn, "relay stderr")
	pr, pw := io.Pipe()
	r := &relay{execID: ex.ID, sock: sock}
	var closeOnce sync.Once
	closer := closerFunc(func() error {
		closeOnce.Do(func() {
			hr.Close()
			pr.Close()
		})
		return nil
	})
	r.ms = mux.New(pr, hr.Conn, closer)
	popts := egress.Options{Session: session, Allow: b.overrides().AllowFunc(session), ConfigKey: b.overrides().ConfigKey,
		Resolver: b.extra.EgressResolver, AllowLoopback: b.extra.EgressAllowLoopback, Record: b.egressObs.Recorder(Name), Logger: log}
	if err = b.extra.Brokering.ApplySession(&popts, b.brokerDir()); err != nil { // secrets.go
		r.ms.Close()
		hr.Close()
		if sock != nil {
			sock.Close()
		}
		return nil, &sandbox.Error{Backend: Name, Op: "egress relay", ID: name, Err: err}
	}
	r.proxy = egress.New(popts)
	if sock != nil {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for {
				c, err := sock.Accept()
				if err != nil {
					return
				}
				r.wg.Add(1)
				go func() {
					defer r.wg.Done()
					r.proxy.ServeHandoffs(c.(*net.UnixConn), func() { r.viaSock.Add(1) })
				}()
			}
		}()
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_, err := stdcopy.StdCopy(pw, stderr, hr.Reader)
		pw.CloseWithError(err)
		stderr.Flush()
	}()
	if err := egress.RunRelay(ctx, r.ms, r.proxy, &r.viaStream, &r.wg, relayGreeting, log); err != nil {
		r.close()
		if errors.Is(err, egress.ErrRelayExited) {
			return nil, &sandbox.Error{Backend: Name, Op: "egress relay", ID: name, Err: fmt.Errorf(
				"%w; it printed: %s: %w", err, strings.TrimSpace(stderr.Tail()), sandbox.ErrUnavailable)}
		}
		return nil, err
	}
	return r, nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
