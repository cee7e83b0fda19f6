//go:build unix

package egress

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"testing"
	"time"
)

const brokerBenchSize = 64 << 20

// BenchmarkBrokeredHTTPS downloads 64 MB over HTTPS from a loopback server three ways in
// every iteration, alternating: directly, through the proxy's blind CONNECT tunnel, and
// through the proxy intercepting the host for a brokered secret (TLS terminated with the
// session's CA, the request re-sent over the proxy's own TLS connection). It reports each
// rate and the two proxied ones as a share of direct.
//
//	go test -run '^$' -bench BrokeredHTTPS -benchtime 5x -count 3 ./internal/egress/
func BenchmarkBrokeredHTTPS(b *testing.B) {
	upstream, err := NewBroker("", "upstream-ca", nil)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(brokerBenchSize))
		for n := brokerBenchSize; n > 0; n -= len(buf) {
			if _, err := w.Write(buf[:min(n, len(buf))]); err != nil {
				return
			}
		}
	})
	srv := func(name string) *httptest.Server {
		cert, err := upstream.leaf(name)
		if err != nil {
			b.Fatal(err)
		}
		s := httptest.NewUnstartedServer(h)
		s.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
		s.StartTLS()
		b.Cleanup(s.Close)
		return s
	}
	api, other := srv("api.brokered.test"), srv("other.test")
	session, err := NewBroker("", "bench", []Secret{{Name: "TOKEN", Hosts: []string{"api.brokered.test"}, Value: "v",
		Header: "Authorization", Format: "Bearer %s"}})
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(upstream.CACertPEM())
	allow, _ := ParseAllowlist([]string{fmt.Sprintf("api.brokered.test:%d", serverPort(api)), fmt.Sprintf("other.test:%d", serverPort(other))})
	lo := netip.MustParseAddr("127.0.0.1")
	p := New(Options{Allow: func() Allowlist { return allow }, Broker: session, UpstreamRoots: roots, Resolver: noResolver{},
		Hosts: map[string]netip.Addr{"api.brokered.test": lo, "other.test": lo}, AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	defer p.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(l)
	trust := x509.NewCertPool()
	trust.AppendCertsFromPEM(upstream.CACertPEM())
	trust.AppendCertsFromPEM(session.CACertPEM())
	pu, _ := url.Parse("http://" + l.Addr().String())
	// New connections each time, as a fresh `curl` or `pip download` makes.
	direct := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: trust, ServerName: "api.brokered.test"}}}
	proxied := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: trust}}}
	// CPU time of the whole process (server, proxy and client are all in it): unlike the wall
	// time, it does not depend on how much of the machine other work leaves to the benchmark.
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var dc, tc, ic time.Duration
	get := func(c *http.Client, u string, used *time.Duration) time.Duration {
		t0, c0 := time.Now(), cpu()
		defer func() { *used += cpu() - c0 }()
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != brokerBenchSize {
			b.Fatalf("%s: got %d bytes, %v", u, n, err)
		}
		return time.Since(t0)
	}
	var dt, tt, it time.Duration
	for i := 0; i < b.N; i++ {
		dt += get(direct, fmt.Sprintf("https://127.0.0.1:%d/", serverPort(api)), &dc)
		tt += get(proxied, fmt.Sprintf("https://other.test:%d/", serverPort(other)), &tc)
		it += get(proxied, fmt.Sprintf("https://api.brokered.test:%d/", serverPort(api)), &ic)
	}
	mb := float64(brokerBenchSize) * float64(b.N) / 1e6
	b.ReportMetric(mb/dt.Seconds(), "direct-MB/s")
	b.ReportMetric(mb/tt.Seconds(), "tunnel-MB/s")
	b.ReportMetric(mb/it.Seconds(), "intercepted-MB/s")
	b.ReportMetric(100*dt.Seconds()/tt.Seconds(), "tunnel-%-of-direct")
	b.ReportMetric(100*dt.Seconds()/it.Seconds(), "intercepted-%-of-direct")
	b.ReportMetric(float64(dc.Microseconds())/mb, "direct-CPU-us/MB")
	b.ReportMetric(float64(tc.Microseconds())/mb, "tunnel-CPU-us/MB")
	b.ReportMetric(float64(ic.Microseconds())/mb, "intercepted-CPU-us/MB")
}
