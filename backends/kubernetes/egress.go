package kubernetes

// Egress with kubernetes.network allowlist. The pod is selected by the scope's deny-all-egress
// NetworkPolicy, as with network none, so where the cluster's CNI enforces NetworkPolicy no
// direct connection, other port or DNS query leaves it. The only way out is a relay: for
// every session channel this process starts, a second long-lived pod exec of the helper
// (`sandbox-agent relay --listen 127.0.0.1:3128`) accepts connections inside the pod and
// carries each over the exec's stdin and stdout, multiplexed (internal/egress/mux), to the
// filtering proxy in this process (internal/egress), which decides on the requested host and
// port, resolves the name itself and connects. HTTP(S)_PROXY in the pod point ordinary tools
// at the relay. The relay ends with the channel, so when no hermes-sandbox process holds the
// session nothing listens and background jobs' connections fail.
//
// Without a NetworkPolicy-enforcing CNI the policy is inert: the pod's own traffic is not
// blocked and only tools that honour the proxy variables are filtered. Egress() says so.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/mux"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

const (
	// relayGreeting bounds the wait for a new relay to listen (the exec's round trip through
	// the API server included). A relay of another process on the same session may hold the
	// port; the new one takes over when it frees.
	relayGreeting = 15 * time.Second
)

// network is kubernetes.network (or network_enabled's meaning).
func (b *Backend) network() config.NetworkMode { return b.cfg.EffectiveNetwork() }

// denyEgress says the pods get the deny-all-egress NetworkPolicy (network none and allowlist).
func (b *Backend) denyEgress() bool { return b.network() != config.NetworkOpen }

// overrides is the configured allowlist with each live session's change to it.
func (b *Backend) overrides() egress.Overrides {
	o := egress.NewOverrides(filepath.Join(b.opts.StateDir, "kubernetes", "egress"), Name, b.cfg.EgressAllow, b.opts.EgressAllow, b.log)
	o.Live = b.extra.Egress.Live // the configuration as it is now, in a process that outlives a change
	return o
}

// ObserveEgress installs the function that receives every connection the proxy decides on
// (the CLI writes them to the audit log). Call it before opening sessions.
func (b *Backend) ObserveEgress(fn func(sandbox.EgressEvent)) { b.egressObs.Set(fn) }

// Egress says what is enforced about outbound connections.
func (b *Backend) Egress() sandbox.EgressReport {
	switch b.network() {
	case config.NetworkAllowlist:
		return b.overrides().Report("the pod has a deny-all-egress NetworkPolicy, and only this tool's filtering proxy, "+
			"reached through the session's relay (a pod exec), connects out, to the hosts in ",
			"; the NetworkPolicy holds only where the cluster's CNI enforces NetworkPolicy (Calico, Cilium, …): "+
				"without one the pod's direct traffic is NOT blocked and only tools that honour HTTP(S)_PROXY are filtered")
	case config.NetworkOpen:
		key := "kubernetes.network is open"
		if b.cfg.Network == "" {
			key = "kubernetes.network_enabled is true"
		}
		return sandbox.EgressReport{Status: sandbox.EgressOpen,
			Detail: "open: " + key + ", pods reach what the cluster network reaches, unfiltered (set kubernetes.network allowlist to filter by host name)"}
	}
	return sandbox.EgressReport{Status: sandbox.EgressNone, AppliesShared: true,
		Detail: "none, provider-enforced: a deny-all egress NetworkPolicy selects the pods (DNS included); it holds only where the cluster's CNI enforces NetworkPolicy"}
}

// SetSessionEgress changes a session's allowlist while it runs: allow adds hosts, deny
// removes them (a denied host stays denied even if the configuration lists it). The change
// applies to the session's next connection, in every process serving it. It returns the
// allowlist now in force.
func (b *Backend) SetSessionEgress(ctx context.Context, session string, allow, deny []string) ([]string, error) {
	if err := b.overrides().CheckChange(Name, session, string(b.network()), allow, deny); err != nil {
		return nil, err
	}
	c, err := b.cluster()
	if err != nil {
		return nil, err
	}
	pod, err := b.findPod(ctx, c, session)
	if err != nil {
		return nil, err
	}
	if pod == nil {
		return nil, &sandbox.Error{Backend: Name, Op: "network", ID: session, Err: fmt.Errorf("no such session: %w", sandbox.ErrNotFound)}
	}
	now, err := b.overrides().Change(session, allow, deny)
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "network", ID: session, Err: err}
	}
	return now, nil
}

// relay is a session's running relay exec and the proxy serving its streams.
type relay struct {
	ms     *mux.Session
	proxy  *egress.Proxy
	stdin  *io.PipeWriter // the exec's stdin: closing it ends the relay in the pod
	cancel context.CancelFunc
	done   chan struct{} // closed when the exec's stream has ended
	wg     sync.WaitGroup

	served atomic.Int64 // connections served
}

// close ends the relay exec (its stdin closes, so the relay inside stops listening) and
// waits for every connection in progress.
func (r *relay) close() {
	r.ms.Close()
	r.stdin.Close()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
	}
	r.cancel()
	<-r.done
	r.proxy.Close()
	r.wg.Wait()
}

// startEgress starts the session's relay in pod, replacing an earlier one. It is called
// whenever a new helper starts, so the relay lives and dies with the session's channel in
// this process.
func (s *session) startEgress(ctx context.Context, pod string) error {
	s.egressMu.Lock()
	defer s.egressMu.Unlock()
	return s.startEgressLocked(ctx, pod)
}

func (s *session) startEgressLocked(ctx context.Context, pod string) error {
	s.stopEgressLocked()
	if s.b.network() != config.NetworkAllowlist {
		return nil
	}
	r, err := s.b.startRelay(ctx, pod, s.name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.relay = r
	s.mu.Unlock()
	return nil
}

// reviveEgress starts the relay again when its exec ended while the session's helper still
// runs (an API server or kubelet cut an idle stream): commands never run without the way
// out they were promised, and fail with the reason when it cannot be restored.
func (s *session) reviveEgress(ctx context.Context) error {
	s.egressMu.Lock()
	defer s.egressMu.Unlock()
	s.mu.Lock()
	r, pod := s.relay, s.pod
	s.mu.Unlock()
	if r == nil || pod == "" {
		return nil // none yet: the channel's start makes one
	}
	select {
	case <-r.ms.Done():
	default:
		return nil
	}
	s.b.log.Info("the egress relay ended; starting it again", "session", s.name, "pod", pod, "err", r.ms.Err())
	err := s.startEgressLocked(ctx, pod)
	if err != nil && gone(err) {
		// The pod itself is gone: the command finds the helper lost too, and the channel's
		// start makes a new pod with a new relay.
		return nil
	}
	return err
}

// stopEgress stops the session's relay, if any.
func (s *session) stopEgress() {
	s.egressMu.Lock()
	defer s.egressMu.Unlock()
	s.stopEgressLocked()
}

func (s *session) stopEgressLocked() {
	s.mu.Lock()
	r := s.relay
	s.relay = nil
	s.mu.Unlock()
	if r != nil {
		r.close()
	}
}

// relayArgs runs the uploaded helper as the relay. There is no --unix: the proxy's host
// socket is not reachable from a pod on another machine.
func relayArgs(bin *agentbin.Binary) []string {
	argv := append([]string{remotePath(bin)}, bin.Args...)
	return append(argv, "relay", "--listen", egress.RelayAddr)
}

// startRelay starts the relay exec in pod (whose helper is uploaded) and serves its streams
// with a proxy for session.
func (b *Backend) startRelay(ctx context.Context, pod, session string) (*relay, error) {
	c, err := b.cluster()
	if err != nil {
		return nil, err
	}
	af, err := b.agentBinary()
	if err != nil {
		return nil, fmt.Errorf("the sandbox helper: %w (%w)", err, sandbox.ErrUnavailable)
	}
	ex, err := b.executor(c, pod, relayArgs(af), true)
	if err != nil {
		return nil, b.mapErr("egress relay", session, err)
	}
	log := b.log.With("pod", pod, "session", session, "role", "egress relay")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &sandbox.TailWriter{}
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &relay{stdin: inW, cancel: cancel, done: make(chan struct{})}
	r.ms = mux.New(outR, inW, inW)
	popts := egress.Options{Session: session, Allow: b.overrides().AllowFunc(session), ConfigKey: b.overrides().ConfigKey,
		Resolver: b.extra.EgressResolver, AllowLoopback: b.extra.EgressAllowLoopback, Record: b.egressObs.Recorder(Name), Logger: log}
	if err := b.extra.Egress.ApplySession(&popts, b.brokerDir()); err != nil { // secrets.go
		cancel()
		return nil, &sandbox.Error{Backend: Name, Op: "egress relay", ID: session, Err: err}
	}
	r.proxy = egress.New(popts)
	var streamErr error
	go func() {
		defer close(r.done)
		streamErr = ex.StreamWithContext(streamCtx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: stderr})
		if streamErr == nil {
			outW.CloseWithError(io.EOF)
		} else {
			outW.CloseWithError(streamErr)
		}
		inW.Close()
	}()
	if err := egress.RunRelay(ctx, r.ms, r.proxy, &r.served, &r.wg, relayGreeting, log); err != nil {
		r.close()
		if errors.Is(err, egress.ErrRelayExited) {
			if streamErr != nil {
				err = fmt.Errorf("%w (%v)", egress.ErrRelayExited, streamErr)
			}
			return nil, &sandbox.Error{Backend: Name, Op: "egress relay", ID: session, Err: fmt.Errorf(
				"pod %s: %w, so commands would have no way out; it printed: %s: %w", pod, err, stderr.String(), sandbox.ErrUnavailable)}
		}
		return nil, err
	}
	return r, nil
}

var (
	_ sandbox.EgressReporter = (*Backend)(nil)
	_ sandbox.EgressObserver = (*Backend)(nil)
)
