//go:build unix

package egress_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
)

// events collects a proxy's events.
type events struct {
	mu  sync.Mutex
	evs []egress.Event
}

func (e *events) record(ev egress.Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}

// wait returns the first event for host, waiting (with a deadline) for it to be recorded.
func (e *events) wait(t *testing.T, host string) egress.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.mu.Lock()
		for _, ev := range e.evs {
			if ev.Host == host {
				e.mu.Unlock()
				return ev
			}
		}
		e.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no event for %s; have %+v", host, e.evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startProxy serves a proxy on loopback with the stand-in internet's resolver.
func startProxy(t *testing.T, in *egresstest.Internet, allow []string, asked *[]string) (string, *events) {
	t.Helper()
	a, err := egress.ParseAllowlist(allow)
	if err != nil {
		t.Fatal(err)
	}
	evs := &events{}
	var mu sync.Mutex
	res := in.Resolver
	res.Asked = func(n string) {
		mu.Lock()
		defer mu.Unlock()
		if asked != nil {
			*asked = append(*asked, n)
		}
	}
	p := egress.New(egress.Options{Session: "s1", Allow: func() egress.Allowlist { return a }, ConfigKey: "docker.egress_allow",
		Resolver: res, AllowLoopback: true, Record: evs.record})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Serve(l)
	}()
	t.Cleanup(func() {
		p.Close()
		<-done
	})
	return l.Addr().String(), evs
}

func proxyClient(proxyAddr string, tc *tls.Config) *http.Client {
	u, _ := url.Parse("http://" + proxyAddr)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: tc, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyHTTPAndConnect(t *testing.T) {
	in := egresstest.New(t)
	var asked []string
	addr, evs := startProxy(t, in, []string{fmt.Sprintf("pypi.test:%d", egresstest.Port(in.Pypi)),
		fmt.Sprintf("secure.test:%d", egresstest.Port(in.Secure))}, &asked)
	c := proxyClient(addr, in.TLSConfig())

	code, body := get(t, c, egresstest.URL(in.Pypi, "http", "pypi.test", "/simple/"))
	if code != 200 || body != "pypi-index-ok\n" {
		t.Errorf("GET pypi.test through the proxy = %d %q; want 200 pypi-index-ok", code, body)
	}
	code, body = get(t, c, egresstest.URL(in.Secure, "https", "secure.test", "/"))
	if code != 200 || body != "secure-ok\n" {
		t.Errorf("GET https://secure.test through CONNECT = %d %q; want 200 secure-ok", code, body)
	}
	code, body = get(t, c, egresstest.URL(in.Evil, "http", "evil.test", "/"))
	if code != http.StatusForbidden || !strings.Contains(body, "evil.test") || !strings.Contains(body, "docker.egress_allow") {
		t.Errorf("GET evil.test = %d %q; want 403 naming evil.test and docker.egress_allow", code, body)
	}
	if n := in.EvilHits.Load(); n != 0 {
		t.Errorf("evil.test was reached %d times", n)
	}
	ev := evs.wait(t, "pypi.test")
	if ev.Decision != egress.Allowed || ev.BytesDown == 0 || ev.BytesUp == 0 || ev.Port != egresstest.Port(in.Pypi) || ev.Session != "s1" {
		t.Errorf("pypi.test event = %+v; want allowed with bytes both ways", ev)
	}
	ev = evs.wait(t, "secure.test")
	if ev.Decision != egress.Allowed || ev.Method != "CONNECT" || ev.BytesDown < 100 {
		t.Errorf("secure.test event = %+v; want an allowed CONNECT that carried a TLS handshake", ev)
	}
	// A tunnel to an allowed host whose TLS hello names another (fronting) is cut.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c2, "CONNECT secure.test:%d HTTP/1.1\r\nHost: secure.test\r\n\r\n", egresstest.Port(in.Secure))
	br := bufio.NewReader(c2)
	if line, _ := br.ReadString('\n'); !strings.Contains(line, " 200 ") {
		t.Fatalf("CONNECT secure.test = %q", line)
	}
	for line, _ := br.ReadString('\n'); line != "\r\n" && line != ""; line, _ = br.ReadString('\n') {
	}
	if err := tls.Client(c2, &tls.Config{ServerName: "evil.test", InsecureSkipVerify: true}).Handshake(); err == nil {
		t.Error("a TLS handshake naming evil.test through a tunnel to secure.test succeeded")
	}
	c2.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs.mu.Lock()
		found := false
		for _, e := range evs.evs {
			found = found || (e.Host == "secure.test" && e.Decision == egress.Denied && strings.Contains(e.Reason, "evil.test"))
		}
		evs.mu.Unlock()
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no denied secure.test event naming evil.test: %+v", evs.evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ev = evs.wait(t, "evil.test")
	if ev.Decision != egress.Denied || ev.Reason == "" || ev.BytesUp != 0 {
		t.Errorf("evil.test event = %+v; want denied with a reason", ev)
	}
	if slices.Contains(asked, "evil.test") {
		t.Errorf("the proxy resolved evil.test (asked %v): a refused name must never be looked up", asked)
	}
}

// TestProxyRefuses covers what must never go through: IP literals in every spelling,
// ports not listed, names not listed (over CONNECT too), requests for the proxy itself.
func TestProxyRefuses(t *testing.T) {
	in := egresstest.New(t)
	addr, _ := startProxy(t, in, []string{"pypi.test", "secure.test"}, nil)
	pp := egresstest.Port(in.Pypi)
	for _, tc := range []struct{ name, req, want string }{
		{"ip literal", fmt.Sprintf("GET http://127.0.0.1:%d/simple/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", pp), "403"},
		{"decimal ip", "GET http://2130706433/ HTTP/1.1\r\nHost: x\r\n\r\n", "403"},
		{"ipv6 literal", fmt.Sprintf("CONNECT [::1]:%d HTTP/1.1\r\nHost: x\r\n\r\n", pp), "403"},
		{"connect ip", fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n", pp), "403"},
		{"port not listed", fmt.Sprintf("GET http://pypi.test:%d/simple/ HTTP/1.1\r\nHost: pypi.test\r\n\r\n", pp), "403"},
		{"connect name not listed", "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test\r\n\r\n", "403"},
		{"origin form", "GET /simple/ HTTP/1.1\r\nHost: pypi.test\r\n\r\n", "400"},
		{"garbage", "\x16\x03\x01hello\r\n\r\n", "400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tc.req)
			line, _ := bufio.NewReader(c).ReadString('\n')
			if !strings.Contains(line, " "+tc.want+" ") {
				t.Errorf("%q → %q; want status %s", tc.req, line, tc.want)
			}
		})
	}
}

// TestProxyRefusesLoopbackByDefault: a listed name that resolves to this host is refused
// unless the test opts in.
func TestProxyRefusesLoopbackByDefault(t *testing.T) {
	in := egresstest.New(t)
	a, _ := egress.ParseAllowlist([]string{fmt.Sprintf("pypi.test:%d", egresstest.Port(in.Pypi))})
	p := egress.New(egress.Options{Allow: func() egress.Allowlist { return a }, Resolver: in.Resolver})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go p.Serve(l)
	t.Cleanup(func() { p.Close() })
	code, body := get(t, proxyClient(l.Addr().String(), nil), egresstest.URL(in.Pypi, "http", "pypi.test", "/simple/"))
	if code != http.StatusBadGateway || !strings.Contains(body, "refused") {
		t.Errorf("GET pypi.test → 127.0.0.1 without AllowLoopback = %d %q; want 502 refused", code, body)
	}
}

// TestProxyLiveAllowlist: the allowlist is read per request, so a change applies to the
// next connection.
func TestProxyLiveAllowlist(t *testing.T) {
	in := egresstest.New(t)
	var mu sync.Mutex
	cur, _ := egress.ParseAllowlist(nil)
	p := egress.New(egress.Options{Allow: func() egress.Allowlist { mu.Lock(); defer mu.Unlock(); return cur },
		Resolver: in.Resolver, AllowLoopback: true})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go p.Serve(l)
	t.Cleanup(func() { p.Close() })
	c := proxyClient(l.Addr().String(), nil)
	u := egresstest.URL(in.Pypi, "http", "pypi.test", "/simple/")
	if code, _ := get(t, c, u); code != 403 {
		t.Fatalf("before the change: %d; want 403", code)
	}
	mu.Lock()
	cur, _ = egress.ParseAllowlist([]string{fmt.Sprintf("pypi.test:%d", egresstest.Port(in.Pypi))})
	mu.Unlock()
	if code, body := get(t, c, u); code != 200 {
		t.Fatalf("after allowing: %d %q; want 200", code, body)
	}
}

func TestProxyUpload(t *testing.T) {
	in := egresstest.New(t)
	addr, evs := startProxy(t, in, []string{fmt.Sprintf("pypi.test:%d", egresstest.Port(in.Pypi))}, nil)
	c := proxyClient(addr, nil)
	resp, err := c.Post(egresstest.URL(in.Pypi, "http", "pypi.test", "/upload"), "application/octet-stream", strings.NewReader(strings.Repeat("x", 3<<20)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != fmt.Sprintf("got %d\n", 3<<20) {
		t.Errorf("upload answer %q", b)
	}
	if ev := evs.wait(t, "pypi.test"); ev.BytesUp < 3<<20 {
		t.Errorf("event BytesUp = %d; want ≥ %d", ev.BytesUp, 3<<20)
	}
}

// TestProxyRefusesHostAddresses: a listed name resolving to one of this host's interface
// addresses (a docker bridge gateway, say) is refused like loopback.
func TestProxyRefusesHostAddresses(t *testing.T) {
	in := egresstest.New(t)
	var local netip.Addr
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			local, _ = netip.AddrFromSlice(n.IP.To4())
			break
		}
	}
	if !local.IsValid() {
		t.Skip("no non-loopback address here")
	}
	res := egresstest.Resolver{Names: map[string][]netip.Addr{"pypi.test": {local}}}
	a, _ := egress.ParseAllowlist([]string{fmt.Sprintf("pypi.test:%d", egresstest.Port(in.Pypi))})
	p := egress.New(egress.Options{Allow: func() egress.Allowlist { return a }, Resolver: res})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go p.Serve(l)
	t.Cleanup(func() { p.Close() })
	code, body := get(t, proxyClient(l.Addr().String(), nil), egresstest.URL(in.Pypi, "http", "pypi.test", "/simple/"))
	if code != http.StatusBadGateway || !strings.Contains(body, "refused") {
		t.Errorf("GET pypi.test → %s (this host) = %d %q; want 502 refused", local, code, body)
	}
}

// TestMaxConns: beyond Options.MaxConns connections at once, one more is closed unserved,
// and a slot frees when a connection ends.
func TestMaxConns(t *testing.T) {
	p := egress.New(egress.Options{MaxConns: 2})
	defer p.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(l)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// closedSoon reports whether the proxy closes c (EOF) within d.
	closedSoon := func(c net.Conn, d time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(d))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	a, b := dial(), dial()
	if closedSoon(a, 300*time.Millisecond) || closedSoon(b, 300*time.Millisecond) {
		t.Fatal("a connection within the limit was closed")
	}
	if third := dial(); !closedSoon(third, 10*time.Second) {
		t.Error("a third connection beyond MaxConns 2 was not closed")
	}
	a.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c := dial(); !closedSoon(c, 300*time.Millisecond) {
			break // the slot a freed was taken
		}
		if time.Now().After(deadline) {
			t.Fatal("no slot freed after a connection ended")
		}
	}
}
