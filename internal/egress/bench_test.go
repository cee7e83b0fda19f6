//go:build unix

package egress_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
)

const benchSize = 100 << 20

// BenchmarkDownload100MB downloads 100 MB from a local server directly and through the
// proxy, in the same run: plain HTTP (forwarded request) and HTTPS (CONNECT tunnel), and
// through the relay and multiplexer that carry a docker session's connections (over
// in-process pipes here, without the docker exec stream), and through the relay handing its
// connections to the proxy over a unix socket, as a local docker session's relay does. Each iteration downloads once
// directly and once through the proxy, alternating, and reports both rates.
//
//	go test -run '^$' -bench Download100MB -benchtime 10x ./internal/egress/
func BenchmarkDownload100MB(b *testing.B) {
	in := egresstest.New(b)
	a, _ := egress.ParseAllowlist([]string{fmt.Sprintf("pypi.test:%d", egresstest.Port(in.Pypi)), fmt.Sprintf("secure.test:%d", egresstest.Port(in.Secure))})
	p := egress.New(egress.Options{Allow: func() egress.Allowlist { return a }, Resolver: in.Resolver, AllowLoopback: true})
	defer p.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(l)
	path := fmt.Sprintf("/bytes/%d", benchSize)
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: in.TLSConfig(), DisableKeepAlives: true}}
	proxied := proxyClient(l.Addr().String(), in.TLSConfig())
	get1 := func(b *testing.B, c *http.Client, url string) time.Duration {
		t0 := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != benchSize {
			b.Fatalf("got %d bytes, %v", n, err)
		}
		return time.Since(t0)
	}
	// pair alternates a direct and a proxied download in every iteration, so load on a
	// shared machine hits both alike, and reports both rates and their ratio.
	pair := func(b *testing.B, dc *http.Client, durl string, pc *http.Client, purl string) {
		var dt, pt time.Duration
		for i := 0; i < b.N; i++ {
			dt += get1(b, dc, durl)
			pt += get1(b, pc, purl)
		}
		mb := float64(benchSize) * float64(b.N) / 1e6
		b.ReportMetric(mb/dt.Seconds(), "direct-MB/s")
		b.ReportMetric(mb/pt.Seconds(), "proxied-MB/s")
		b.ReportMetric(100*dt.Seconds()/pt.Seconds(), "%-of-direct")
	}
	httpDirect := fmt.Sprintf("http://127.0.0.1:%d%s", egresstest.Port(in.Pypi), path)
	tlsDirect := fmt.Sprintf("https://127.0.0.1:%d%s", egresstest.Port(in.Secure), path)
	b.Run("http", func(b *testing.B) {
		pair(b, direct, httpDirect, proxied, egresstest.URL(in.Pypi, "http", "pypi.test", path))
	})
	b.Run("https-connect", func(b *testing.B) {
		pair(b, direct, tlsDirect, proxied, egresstest.URL(in.Secure, "https", "secure.test", path))
	})
	b.Run("http-relay", func(b *testing.B) {
		relay, _, stop := relayChainB(b, p, false)
		defer stop()
		pair(b, direct, httpDirect, proxyClient(relay, nil), egresstest.URL(in.Pypi, "http", "pypi.test", path))
	})
	b.Run("http-handoff", func(b *testing.B) {
		relay, _, stop := relayChainB(b, p, true)
		defer stop()
		pair(b, direct, httpDirect, proxyClient(relay, nil), egresstest.URL(in.Pypi, "http", "pypi.test", path))
	})
}
