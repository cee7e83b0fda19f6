//go:build unix

package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// interceptSetup runs a proxy brokering TOKEN for api.brokered.test, served by h over TLS on
// loopback, and returns a client (through the proxy, trusting the session's CA) and the URL
// of the server by its brokered name.
func interceptSetup(t *testing.T, h http.Handler) (*http.Client, string, *brokerEvents) {
	t.Helper()
	upstream, err := NewBroker("", "upstream-ca", nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := upstream.leaf("api.brokered.test")
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(h)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	s.StartTLS()
	t.Cleanup(s.Close)
	session, err := NewBroker("", "s1", []Secret{{Name: "TOKEN", Hosts: []string{"api.brokered.test"}, Value: realToken,
		Header: "Authorization", Format: "Bearer %s"}})
	if err != nil {
		t.Fatal(err)
	}
	allow, err := ParseAllowlist([]string{fmt.Sprintf("api.brokered.test:%d", serverPort(s))})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(upstream.CACertPEM())
	evs := &brokerEvents{}
	p := New(Options{Session: "s1", Allow: func() Allowlist { return allow }, Broker: session, UpstreamRoots: roots,
		Resolver: noResolver{}, Hosts: map[string]netip.Addr{"api.brokered.test": netip.MustParseAddr("127.0.0.1")},
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Record: evs.record})
	pu := serveProxy(t, p)
	trust := x509.NewCertPool()
	trust.AppendCertsFromPEM(session.CACertPEM())
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu),
		TLSClientConfig: &tls.Config{RootCAs: trust}}}
	t.Cleanup(c.CloseIdleConnections)
	return c, fmt.Sprintf("https://api.brokered.test:%d/", serverPort(s)), evs
}

// TestInterceptStreamsResponses: a response that comes in parts (server-sent events from an
// API whose key is brokered, a git server's progress) reaches the client part by part. The
// server sends its second part only after the client has read the first, so a proxy that
// held the first part back until it had more (or the whole body) never delivers it.
func TestInterceptStreamsResponses(t *testing.T) {
	for _, length := range []bool{false, true} {
		t.Run("content-length="+strconv.FormatBool(length), func(t *testing.T) {
			release := make(chan struct{})
			first, second := "data: first\n\n", "data: second\n\n"
			c, u, evs := interceptSetup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if length {
					w.Header().Set("Content-Length", strconv.Itoa(len(first)+len(second)))
				}
				io.WriteString(w, first)
				w.(http.Flusher).Flush()
				select {
				case <-release:
				case <-time.After(15 * time.Second):
				case <-r.Context().Done():
				}
				io.WriteString(w, second)
			}))
			got := make(chan string, 1)
			var resp *http.Response
			var br *bufio.Reader
			go func() {
				var err error
				if resp, err = c.Get(u); err != nil {
					got <- "error: " + err.Error()
					return
				}
				br = bufio.NewReader(resp.Body)
				var b strings.Builder
				for b.Len() < len(first) {
					line, err := br.ReadString('\n')
					b.WriteString(line)
					if err != nil {
						break
					}
				}
				got <- b.String()
			}()
			select {
			case s := <-got:
				if s != first {
					t.Fatalf("first part = %q; want %q", s, first)
				}
			case <-time.After(5 * time.Second):
				close(release)
				t.Fatal("the response (headers and first part) did not reach the client within 5 s while the server waited for it to be read")
			}
			close(release)
			defer resp.Body.Close()
			rest, err := io.ReadAll(br)
			if err != nil || string(rest) != second {
				t.Fatalf("rest = %q, %v; want %q", rest, err, second)
			}
			if ev := evs.last(t, "api.brokered.test", 1); ev.Error != "" || ev.BytesDown != int64(len(first)+len(second)) {
				t.Errorf("event = %+v; want no error and %d bytes down", ev, len(first)+len(second))
			}
		})
	}
}

// TestInterceptClientGoneStopsUpstream: a client that leaves in the middle of an endless
// download ends the proxy's request upstream too (the server sees its request cancelled), and
// the request's event is recorded with the error.
func TestInterceptClientGoneStopsUpstream(t *testing.T) {
	ended := make(chan struct{})
	chunk := make([]byte, 64<<10)
	c, u, evs := interceptSetup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.CopyN(io.Discard, resp.Body, 1<<20); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	resp.Body.Close() // not read to the end: the client's connection to the proxy closes
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still sends 10 s after the client left")
	}
	if ev := evs.last(t, "api.brokered.test", 1); ev.Error == "" || ev.BytesDown < 1<<20 {
		t.Errorf("event = %+v; want an error and at least 1 MB down", ev)
	}
}
