package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/mux"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// ServeStreams serves each stream a relay opens on ms (one per connection made inside the
// sandbox) with p, until ms ends. served, if not nil, counts them.
func ServeStreams(ms *mux.Session, p *Proxy, served *atomic.Int64) {
	for {
		st, err := ms.Accept()
		if err != nil {
			return
		}
		if served != nil {
			served.Add(1)
		}
		p.Go(st)
	}
}

// RelayAddr is where a sandbox's relay listens: the sandbox's own loopback.
const RelayAddr = "127.0.0.1:3128"

// ProxyEnv is what points ordinary tools (pip, npm, git, curl, wget) inside a sandbox at its
// relay.
func ProxyEnv() map[string]string {
	env := map[string]string{}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env[k] = "http://" + RelayAddr
	}
	env["NO_PROXY"] = "localhost,127.0.0.1,::1"
	env["no_proxy"] = env["NO_PROXY"]
	return env
}

// Observer hands a backend's proxy events on to whoever watches them (the CLI writes them to
// the audit log). The zero value discards events until Set.
type Observer struct {
	mu sync.Mutex
	fn func(sandbox.EgressEvent) // guarded by mu
}

// Set installs fn; call it before sessions open.
func (o *Observer) Set(fn func(sandbox.EgressEvent)) {
	o.mu.Lock()
	o.fn = fn
	o.mu.Unlock()
}

// Recorder returns the Options.Record function for proxies of backend.
func (o *Observer) Recorder(backend string) func(Event) {
	return func(ev Event) {
		o.mu.Lock()
		fn := o.fn
		o.mu.Unlock()
		if fn == nil {
			return
		}
		reason := ev.Reason
		if len(ev.Secrets) > 0 { // names only: the audit says which credential went where
			reason = strings.TrimPrefix(reason+"; brokered secret added: "+strings.Join(ev.Secrets, ", "), "; ")
		}
		fn(sandbox.EgressEvent{Session: ev.Session, Backend: backend, Method: ev.Method, Host: ev.Host, Port: ev.Port,
			Decision: ev.Decision, Reason: reason, Error: ev.Error, BytesUp: ev.BytesUp, BytesDown: ev.BytesDown, Duration: ev.Duration,
			Change: ev.Change})
	}
}

// ErrRelayExited is returned by RunRelay when the relay ended before it listened.
var ErrRelayExited = errors.New("the relay exited before listening on " + RelayAddr)

// RunRelay runs the host side of a relay's multiplexed stream ms: it reads ms and serves each
// stream with p (counted in served), on goroutines added to wg, and waits up to greeting for
// the relay to listen. It returns nil once the relay listens, or once greeting has passed
// (another process's relay of the same session holds the port; this one takes over when it
// frees, and commands meanwhile go through that process's proxy). It returns ErrRelayExited
// (with why) when the relay ended first, and ctx's error when ctx ends; the caller then
// closes ms and waits for wg.
func RunRelay(ctx context.Context, ms *mux.Session, p *Proxy, served *atomic.Int64, wg *sync.WaitGroup, greeting time.Duration, log *slog.Logger) error {
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := ms.Run(); err != nil && !errors.Is(err, mux.ErrClosed) {
			log.Debug("relay stream ended", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		ServeStreams(ms, p, served)
	}()
	t := time.NewTimer(greeting)
	defer t.Stop()
	select {
	case <-ms.Greeting():
		return nil
	case <-ms.Done():
		return fmt.Errorf("%w (%v)", ErrRelayExited, ms.Err())
	case <-t.C:
		log.Info("egress relay is waiting for the port; another process serves this session's egress now")
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
