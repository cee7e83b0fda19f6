package egress_test

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/mux"
)

// relayChain runs the in-sandbox relay and the host side over pipes, as a docker session
// does over its exec stream, and returns the relay's listening address.
func relayChain(t *testing.T, p *egress.Proxy) (string, func()) { return relayChainB(t, p) }

// relayChainB is relayChain for tests and benchmarks.
func relayChainB(t testing.TB, p *egress.Proxy) (string, func()) {
	t.Helper()
	toRelayR, toRelayW := io.Pipe()
	fromRelayR, fromRelayW := io.Pipe()
	relayDone := make(chan error, 1)
	go func() { relayDone <- agent.Relay("127.0.0.1:0", "", toRelayR, fromRelayW); fromRelayW.Close() }()
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
	return addr, stop
}

func TestRelayChain(t *testing.T) {
	in := egresstest.New(t)
	evs := &events{}
	a, _ := egress.ParseAllowlist([]string{fmt.Sprintf("pypi.test:%d", egresstest.Port(in.Pypi)), fmt.Sprintf("secure.test:%d", egresstest.Port(in.Secure))})
	p := egress.New(egress.Options{Session: "chain", Allow: func() egress.Allowlist { return a }, Resolver: in.Resolver, AllowLoopback: true, Record: evs.record})
	defer p.Close()
	addr, stop := relayChain(t, p)
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
	stop()
	// With the host side gone, the relay no longer listens: nothing leaves any more.
	if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		conn.Close()
		t.Errorf("the relay still accepts on %s after the host side ended", addr)
	}
}
