//go:build unix

package egress_test

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/mux"
)

// relayChain runs the in-sandbox relay and the host side over pipes, as a docker session
// does over its exec stream, and returns the relay's listening address. With handoff, the
// relay hands its connections over a unix socket to the proxy (as in a local docker
// session), and handed counts them.
func relayChain(t *testing.T, p *egress.Proxy, handoff bool) (addr string, handed *atomic.Int64, stop func()) {
	return relayChainB(t, p, handoff)
}

// relayChainB is relayChain for tests and benchmarks.
func relayChainB(t testing.TB, p *egress.Proxy, handoff bool) (string, *atomic.Int64, func()) {
	t.Helper()
	handed := &atomic.Int64{}
	upstream := ""
	var socks sync.WaitGroup
	if handoff {
		upstream = filepath.Join(t.TempDir(), "proxy.sock")
		ul, err := net.Listen("unix", upstream)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ul.Close(); socks.Wait() })
		socks.Add(1)
		go func() {
			defer socks.Done()
			for {
				c, err := ul.Accept()
				if err != nil {
					return
				}
				socks.Add(1)
				go func() { defer socks.Done(); p.ServeHandoffs(c.(*net.UnixConn), func() { handed.Add(1) }) }()
			}
		}()
	}
	toRelayR, toRelayW := io.Pipe()
	fromRelayR, fromRelayW := io.Pipe()
	relayDone := make(chan error, 1)
	go func() { relayDone <- agent.Relay("127.0.0.1:0", upstream, toRelayR, fromRelayW); fromRelayW.Close() }()
	host := mux.New(fromRelayR, toRelayW, toRelayW)
	ran := make(chan struct{})
	go func() { defer close(ran); host.Run() }()
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			st, err := host.Accept()
			if err != nil {
				return
			}
			p.Go(st)
		}
	}()
	var addr string
	select {
	case g := <-host.Greeting():
		addr = string(g)
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not greet")
	}
	stop := func() {
		host.Close()
		<-ran
		<-accepted
		if err := <-relayDone; err != nil {
			t.Errorf("Relay() = %v", err)
		}
	}
	return addr, handed, stop
}

// TestRelayChain carries HTTP, HTTPS and a refusal through the relay, over the stream and
// handed over the unix socket, and checks which path each took.
func TestRelayChain(t *testing.T) {
	for _, handoff := range []bool{false, true} {
		t.Run(map[bool]string{false: "stream", true: "handoff"}[handoff], func(t *testing.T) { testRelayChain(t, handoff) })
	}
}

func testRelayChain(t *testing.T, handoff bool) {
	in := egresstest.New(t)
	evs := &events{}
	a, _ := egress.ParseAllowlist([]string{fmt.Sprintf("pypi.test:%d", egresstest.Port(in.Pypi)), fmt.Sprintf("secure.test:%d", egresstest.Port(in.Secure))})
	p := egress.New(egress.Options{Session: "chain", Allow: func() egress.Allowlist { return a }, Resolver: in.Resolver, AllowLoopback: true, Record: evs.record})
	defer p.Close()
	addr, handed, stop := relayChain(t, p, handoff)
	c := proxyClient(addr, in.TLSConfig())
	const n = 8 << 20
	code, body := get(t, c, egresstest.URL(in.Pypi, "http", "pypi.test", fmt.Sprintf("/bytes/%d", n)))
	if code != 200 || len(body) != n {
		t.Errorf("GET 8 MiB through the relay = %d, %d bytes; want 200, %d", code, len(body), n)
	}
	code, body = get(t, c, egresstest.URL(in.Secure, "https", "secure.test", fmt.Sprintf("/bytes/%d", n)))
	if code != 200 || len(body) != n {
		t.Errorf("GET 8 MiB over TLS through the relay = %d, %d bytes; want 200, %d", code, len(body), n)
	}
	code, body = get(t, c, egresstest.URL(in.Evil, "http", "evil.test", "/"))
	if code != 403 {
		t.Errorf("GET evil.test through the relay = %d %q; want 403", code, body)
	}
	if ev := evs.wait(t, "secure.test"); ev.BytesDown < n {
		t.Errorf("secure.test event BytesDown = %d; want ≥ %d", ev.BytesDown, n)
	}
	if ev := evs.wait(t, "pypi.test"); ev.BytesDown < n {
		t.Errorf("pypi.test event BytesDown = %d; want ≥ %d", ev.BytesDown, n)
	}
	if got := handed.Load(); handoff && got < 3 || !handoff && got != 0 {
		t.Errorf("%d connections were handed over the unix socket; want %v", got, map[bool]string{true: "all 3 (or more)", false: "none"}[handoff])
	}
	stop()
	// With the host side gone, the relay no longer listens: nothing leaves any more.
	if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		conn.Close()
		t.Errorf("the relay still accepts on %s after the host side ended", addr)
	}
}
