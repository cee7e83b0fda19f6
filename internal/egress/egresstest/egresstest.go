// Package egresstest stands in for the internet in tests of the egress proxy: local HTTP and
// TLS servers under made-up names (pypi.test, evil.test, secure.test) and a resolver that
// maps those names to them, so nothing outside this machine is ever reached.
package egresstest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Internet is a set of stand-in servers and the resolver that finds them.
type Internet struct {
	// Pypi (pypi.test) serves /simple/ with "pypi-index-ok" and /bytes/N with N zero bytes.
	Pypi *httptest.Server
	// Evil (evil.test) answers "evil-secret"; it counts requests that reached it.
	Evil     *httptest.Server
	EvilHits atomic.Int64
	// Secure (secure.test) is a TLS server answering "secure-ok" at / and serving Pypi's
	// paths too.
	Secure *httptest.Server
	// Resolver maps the names to the servers' loopback addresses.
	Resolver Resolver
}

// Resolver maps names to addresses; other names do not resolve. It records every name
// asked for, so a test can prove a refused name was never looked up.
type Resolver struct {
	Names map[string][]netip.Addr
	Asked func(name string)
}

// LookupNetIP implements egress.Resolver.
func (r Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if r.Asked != nil {
		r.Asked(host)
	}
	if a, ok := r.Names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// listenAll listens on every interface (so a container without the proxy could reach it
// through its bridge if it had a network); tests name it only by loopback or the bridge.
func listenAll(t testing.TB) net.Listener {
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return l
}

// New starts the stand-in servers; they stop when the test ends.
func New(t testing.TB) *Internet {
	in := &Internet{}
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "pypi-index-ok\n") })
	mux.HandleFunc("/bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 256<<10)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "got %d\n", n)
	})
	in.Pypi = &httptest.Server{Listener: listenAll(t), Config: &http.Server{Handler: mux}}
	in.Pypi.Start()
	in.Evil = &httptest.Server{Listener: listenAll(t), Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.EvilHits.Add(1)
		io.WriteString(w, "evil-secret\n")
	})}}
	in.Evil.Start()
	secure := http.NewServeMux()
	secure.Handle("/", mux)
	secure.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secure-ok\n") })
	in.Secure = &httptest.Server{Listener: listenAll(t), Config: &http.Server{Handler: secure}}
	in.Secure.StartTLS()
	t.Cleanup(func() {
		in.Pypi.Close()
		in.Evil.Close()
		in.Secure.Close()
	})
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	in.Resolver = Resolver{Names: map[string][]netip.Addr{"pypi.test": lo, "evil.test": lo, "secure.test": lo}}
	return in
}

// Port returns a server's port.
func Port(s *httptest.Server) int { return s.Listener.Addr().(*net.TCPAddr).Port }

// URL returns a URL for a server under its made-up name.
func URL(s *httptest.Server, scheme, name, path string) string {
	return fmt.Sprintf("%s://%s:%d%s", scheme, name, Port(s), path)
}

// TLSConfig trusts Secure's certificate when reached as secure.test: the client sends the
// name it dials (secure.test) as the TLS server name, as real clients do, and checks the
// chain against Secure's certificate, which names example.com.
func (in *Internet) TLSConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(in.Secure.Certificate())
	return &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("no certificate")
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.com"})
		return err
	}}
}

var getter struct {
	sync.Mutex
	path string // guarded by the embedded Mutex
	err  error  // guarded by the embedded Mutex
}

// Getter builds egressget (a static HTTP(S) client that honours the proxy variables and
// uses CONNECT for HTTPS) once per test process and returns its path.
func Getter(t testing.TB) string {
	t.Helper()
	getter.Lock()
	defer getter.Unlock()
	if getter.path == "" && getter.err == nil {
		// One place per user, rebuilt (from the build cache) by each test process, so no
		// test run leaves a directory behind.
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("hermes-sandbox-egressget-%d", os.Getuid()))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		_, self, _, _ := runtime.Caller(0)
		out := filepath.Join(dir, "egressget")
		tmp := fmt.Sprintf("%s.%d", out, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "./egressget")
		cmd.Dir = filepath.Dir(self)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if b, err := cmd.CombinedOutput(); err != nil {
			getter.err = fmt.Errorf("build egressget: %v: %s", err, b)
		} else if err := os.Rename(tmp, out); err != nil { // atomic: concurrent test processes build the same file
			getter.err = err
		} else {
			getter.path = out
		}
	}
	if getter.err != nil {
		t.Fatal(getter.err)
	}
	return getter.path
}

// Log collects a backend's egress events (pass Add to ObserveEgress).
type Log struct {
	mu  sync.Mutex
	evs []sandbox.EgressEvent // guarded by mu
}

// Add records ev.
func (l *Log) Add(ev sandbox.EgressEvent) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
}

// All returns the events recorded so far.
func (l *Log) All() []sandbox.EgressEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sandbox.EgressEvent(nil), l.evs...)
}

// Wait returns the first event for host with decision, polling until a deadline.
func (l *Log) Wait(t testing.TB, host, decision string) sandbox.EgressEvent {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		l.mu.Lock()
		for _, ev := range l.evs {
			if ev.Host == host && ev.Decision == decision {
				l.mu.Unlock()
				return ev
			}
		}
		l.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for %s; have %+v", decision, host, l.evs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// HostIP is an IPv4 address of this machine that is not loopback: the stand-in servers
// listen on every interface, so a sandbox with a network could reach them by it. It skips
// the test when there is none.
func HostIP(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this machine")
	return ""
}
