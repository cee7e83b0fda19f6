//go:build unix

package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer answers every request with its headers as JSON. A TLS server gets a certificate
// for name from ca (its own CA, which the proxy trusts through UpstreamRoots).
func echoServer(t *testing.T, ca *Broker, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "header": r.Header})
	}))
	if ca != nil {
		cert, err := ca.leaf(name)
		if err != nil {
			t.Fatal(err)
		}
		s.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

type brokerEvents struct {
	mu  sync.Mutex
	evs []Event
}

func (e *brokerEvents) record(ev Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}

// last returns the last event for host, waiting for one with a deadline.
func (e *brokerEvents) last(t *testing.T, host string, n int) Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.mu.Lock()
		var got []Event
		for _, ev := range e.evs {
			if ev.Host == host {
				got = append(got, ev)
			}
		}
		e.mu.Unlock()
		if len(got) >= n {
			return got[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no event %d for %s; have %+v", n, host, e.evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func serverPort(s *httptest.Server) int { return s.Listener.Addr().(*net.TCPAddr).Port }

const realToken = "real-token-9f8e7d6c5b4a"

// brokerSetup runs a proxy for session s1 with secret TOKEN for api.brokered.test and GIT
// (basic auth) for git.brokered.test, and returns it with clients trusting s1's CA.
type brokerSetup struct {
	api, git, other, plain *httptest.Server
	s1, s2                 *Broker
	evs                    *brokerEvents
	client                 *http.Client
	dir                    string
	secrets                []Secret
}

func newBrokerSetup(t *testing.T) *brokerSetup {
	t.Helper()
	upstream, err := NewBroker("", "upstream-ca", nil)
	if err != nil {
		t.Fatal(err)
	}
	bs := &brokerSetup{evs: &brokerEvents{}, dir: t.TempDir()}
	bs.api = echoServer(t, upstream, "api.brokered.test")
	bs.git = echoServer(t, upstream, "git.brokered.test")
	bs.other = echoServer(t, upstream, "other.test")
	bs.plain = echoServer(t, nil, "plain.test")
	bs.secrets = []Secret{
		{Name: "TOKEN", Hosts: []string{"api.brokered.test"}, Value: realToken, Header: "Authorization", Format: "Bearer %s"},
		{Name: "GIT", Hosts: []string{"git.brokered.test"}, Value: realToken + "-git", BasicAuthUser: "x-access-token"},
	}
	if bs.s1, err = NewBroker(bs.dir, "s1", bs.secrets); err != nil {
		t.Fatal(err)
	}
	if bs.s2, err = NewBroker(bs.dir, "s2", bs.secrets); err != nil {
		t.Fatal(err)
	}
	allow, err := ParseAllowlist([]string{
		fmt.Sprintf("api.brokered.test:%d", serverPort(bs.api)), fmt.Sprintf("git.brokered.test:%d", serverPort(bs.git)),
		fmt.Sprintf("other.test:%d", serverPort(bs.other)), fmt.Sprintf("plain.test:%d", serverPort(bs.plain))})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(upstream.CACertPEM())
	lo := netip.MustParseAddr("127.0.0.1")
	p := New(Options{Session: "s1", Allow: func() Allowlist { return allow }, Broker: bs.s1, UpstreamRoots: roots,
		Hosts:        map[string]netip.Addr{"api.brokered.test": lo, "git.brokered.test": lo, "other.test": lo, "plain.test": lo},
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Record: bs.evs.record,
		Resolver: noResolver{}})
	pu := serveProxy(t, p)
	// The sandbox's trust: the session's CA (for brokered hosts) and the servers' own CA (for
	// the blind tunnel to other.test, whose certificate the client checks itself).
	trust := x509.NewCertPool()
	trust.AppendCertsFromPEM(bs.s1.CACertPEM())
	trust.AppendCertsFromPEM(upstream.CACertPEM())
	bs.client = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu),
		TLSClientConfig: &tls.Config{RootCAs: trust}}}
	return bs
}

// serveProxy serves p on a loopback port until the test ends, and returns the address to set
// as a client's proxy.
func serveProxy(tb testing.TB, p *Proxy) *url.URL {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); p.Serve(l) }()
	tb.Cleanup(func() { p.Close(); <-done })
	return &url.URL{Scheme: "http", Host: l.Addr().String()}
}

// noResolver resolves nothing: every name in these tests comes from Options.Hosts.
type noResolver struct{}

func (noResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// call sends a request with headers through the proxy and returns the headers the server saw.
func (bs *brokerSetup) call(t *testing.T, u string, hdr map[string]string, user, pass string) http.Header {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := bs.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	var got struct{ Header http.Header }
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("GET %s: status %d, body %q", u, resp.StatusCode, body)
	}
	return got.Header
}

func TestBrokerReplacesPlaceholderOnlyForItsHost(t *testing.T) {
	bs := newBrokerSetup(t)
	ph := bs.s1.Env()["TOKEN"]
	if !strings.HasPrefix(ph, PlaceholderPrefix) || strings.Contains(ph, realToken) {
		t.Fatalf("placeholder %q", ph)
	}
	if other := bs.s2.Env()["TOKEN"]; other == ph {
		t.Fatalf("sessions s1 and s2 share the placeholder %q", ph)
	}
	apiURL := fmt.Sprintf("https://api.brokered.test:%d/user", serverPort(bs.api))

	// The brokered host gets the real value in place of the placeholder.
	h := bs.call(t, apiURL, map[string]string{"Authorization": "token " + ph, "X-Other": "keep " + ph}, "", "")
	if got := h.Get("Authorization"); got != "token "+realToken {
		t.Errorf("api.brokered.test got Authorization %q; want the real token in place of the placeholder", got)
	}
	if got := h.Get("X-Other"); got != "keep "+realToken {
		t.Errorf("api.brokered.test got X-Other %q; want the placeholder replaced in any header", got)
	}
	if ev := bs.evs.last(t, "api.brokered.test", 1); ev.Decision != Allowed || len(ev.Secrets) != 1 || ev.Secrets[0] != "TOKEN" || ev.Reason != "" {
		t.Errorf("event %+v; want allowed, Secrets [TOKEN], no reason", ev)
	}

	// No credential at all: the configured header is added.
	if got := bs.call(t, apiURL, nil, "", "").Get("Authorization"); got != "Bearer "+realToken {
		t.Errorf("a request without credentials got Authorization %q; want %q", got, "Bearer "+realToken)
	}

	// Another session's placeholder is not replaced, and is reported.
	ph2 := bs.s2.Env()["TOKEN"]
	if got := bs.call(t, apiURL, map[string]string{"Authorization": "Bearer " + ph2}, "", "").Get("Authorization"); got != "Bearer "+ph2 {
		t.Errorf("s2's placeholder through s1's proxy arrived as %q; want it unchanged", got)
	}
	if ev := bs.evs.last(t, "api.brokered.test", 3); !strings.Contains(ev.Reason, "another session") || len(ev.Secrets) != 0 {
		t.Errorf("event for s2's placeholder %+v; want a possible exfiltration and no secret used", ev)
	}

	// TOKEN's placeholder sent to git.brokered.test (intercepted for GIT) is not replaced.
	gitURL := fmt.Sprintf("https://git.brokered.test:%d/repo.git/info/refs", serverPort(bs.git))
	if got := bs.call(t, gitURL, map[string]string{"X-Token": ph}, "", "").Get("X-Token"); got != ph {
		t.Errorf("TOKEN's placeholder at git.brokered.test arrived as %q; want it unchanged", got)
	}
	if ev := bs.evs.last(t, "git.brokered.test", 1); !strings.Contains(ev.Reason, "TOKEN") || strings.Contains(ev.Reason, "another session") {
		t.Errorf("event %+v; want a possible exfiltration of TOKEN", ev)
	}

	// Basic auth (git over HTTPS): the placeholder as the password becomes the real value,
	// with the configured user.
	h = bs.call(t, gitURL, nil, "anything", bs.s1.Env()["GIT"])
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+realToken+"-git"))
	if got := h.Get("Authorization"); got != want {
		t.Errorf("git basic auth arrived as %q; want %q", got, want)
	}

	// Another allowed host, plain HTTP: unchanged, and audited.
	plainURL := fmt.Sprintf("http://plain.test:%d/gist", serverPort(bs.plain))
	if got := bs.call(t, plainURL, map[string]string{"Authorization": "Bearer " + ph}, "", "").Get("Authorization"); got != "Bearer "+ph {
		t.Errorf("plain.test got %q; want the placeholder unchanged", got)
	}
	if ev := bs.evs.last(t, "plain.test", 1); ev.Decision != Allowed || !strings.Contains(ev.Reason, "possible exfiltration") || !strings.Contains(ev.Reason, "TOKEN") {
		t.Errorf("event %+v; want allowed with a possible exfiltration of TOKEN", ev)
	}

	// Another allowed host over HTTPS stays a blind tunnel: its server's own certificate, the
	// placeholder unchanged.
	otherURL := fmt.Sprintf("https://other.test:%d/", serverPort(bs.other))
	if got := bs.call(t, otherURL, map[string]string{"Authorization": "Bearer " + ph}, "", "").Get("Authorization"); got != "Bearer "+ph {
		t.Errorf("other.test got %q; want the placeholder unchanged", got)
	}
	bs.client.CloseIdleConnections() // the tunnel's event comes when it ends
	if ev := bs.evs.last(t, "other.test", 1); ev.Method != http.MethodConnect || len(ev.Secrets) != 0 {
		t.Errorf("event %+v; want one CONNECT tunnel and no secret", ev)
	}

	// No event carries the value.
	bs.evs.mu.Lock()
	for _, ev := range bs.evs.evs {
		if strings.Contains(fmt.Sprintf("%+v", ev), realToken) {
			t.Errorf("an event holds the real value: %+v", ev)
		}
	}
	bs.evs.mu.Unlock()
}

// TestBrokerStatePersists: a later process serving the session uses the same placeholders and
// CA, kept in a private file that holds no secret value.
func TestBrokerStatePersists(t *testing.T) {
	dir := t.TempDir()
	secrets := []Secret{{Name: "TOKEN", Hosts: []string{"api.example.com"}, Value: realToken}}
	a, err := NewBroker(dir, "s1", secrets)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBroker(dir, "s1", secrets)
	if err != nil {
		t.Fatal(err)
	}
	if a.Env()["TOKEN"] != b.Env()["TOKEN"] || string(a.CACertPEM()) != string(b.CACertPEM()) {
		t.Errorf("a second broker for s1 has other placeholders or CA")
	}
	st, err := os.Stat(BrokerStatePath(dir, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(BrokerStatePath(dir, "s1"))
	if st.Mode().Perm() != 0o600 || strings.Contains(string(data), realToken) {
		t.Errorf("state file mode %04o, holds the value: %v; want 0600 without it", st.Mode().Perm(), strings.Contains(string(data), realToken))
	}
	if strings.Contains(string(a.CACertPEM()), "PRIVATE KEY") {
		t.Errorf("CACertPEM holds the CA key")
	}
	if _, err := NewBroker(dir, "s1", []Secret{{Name: "X", Hosts: []string{"a.example"}}}); err == nil {
		t.Errorf("a secret without a value was accepted")
	}
}

// TestProxyAllowPrivate: egress.hosts pointing a name at loopback is refused unless
// egress.allow_private lists the network.
func TestProxyAllowPrivate(t *testing.T) {
	s := echoServer(t, nil, "")
	allow, _ := ParseAllowlist([]string{fmt.Sprintf("mirror.corp:%d", serverPort(s))})
	for _, tc := range []struct {
		private []netip.Prefix
		want    int
	}{{nil, http.StatusBadGateway}, {[]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, http.StatusOK}} {
		p := New(Options{Allow: func() Allowlist { return allow }, Resolver: noResolver{},
			Hosts: map[string]netip.Addr{"mirror.corp": netip.MustParseAddr("127.0.0.1")}, AllowPrivate: tc.private})
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		done := make(chan struct{})
		go func() { defer close(done); p.Serve(l) }()
		pu, _ := url.Parse("http://" + l.Addr().String())
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
		resp, err := c.Get(fmt.Sprintf("http://mirror.corp:%d/", serverPort(s)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("allow_private %v: status %d; want %d", tc.private, resp.StatusCode, tc.want)
		}
		p.Close()
		<-done
	}
}

// TestRemoveSession: a removed session's state and bundle go, and the next session of the same
// name gets a new placeholder.
func TestRemoveSession(t *testing.T) {
	dir, bundles := t.TempDir(), t.TempDir()
	secrets := []Secret{{Name: "TOKEN", Hosts: []string{"api.example.com"}, Value: realToken}}
	a, err := NewBroker(dir, "s1", secrets)
	if err != nil {
		t.Fatal(err)
	}
	name, err := a.WriteBundle(bundles, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bundles, name)); err != nil {
		t.Fatalf("bundle not written: %v", err)
	}
	RemoveSession(dir, bundles, "s1")
	for _, p := range []string{filepath.Join(bundles, name), BrokerStatePath(dir, "s1")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is still there after RemoveSession", p)
		}
	}
	b, err := NewBroker(dir, "s1", secrets)
	if err != nil {
		t.Fatal(err)
	}
	if b.Env()["TOKEN"] == a.Env()["TOKEN"] {
		t.Errorf("the new session s1 got the removed one's placeholder")
	}
}
