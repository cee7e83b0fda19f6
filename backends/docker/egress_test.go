//go:build unix

package docker

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// newEgressBackend is a docker backend with docker.network allowlist whose proxy resolves
// the stand-in internet's names.
func newEgressBackend(t *testing.T, in *egresstest.Internet, allow []string) (*Backend, *egresstest.Log, *[]string) {
	t.Helper()
	img := testImage(t)
	cfg := config.NewConfig()
	cfg.Docker.Image = img
	cfg.Docker.Network = config.NetworkAllowlist
	cfg.Docker.EgressAllow = allow
	if testRuntime != "" {
		needRuntime(t, testRuntime)
		cfg.Docker.Runtime = testRuntime
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	asked := &[]string{}
	res := in.Resolver
	res.Asked = func(n string) { mu.Lock(); *asked = append(*asked, n); mu.Unlock() }
	b, err := NewWith(cfg.Docker, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir(), Environ: testEnviron(), Logger: testenv.Logger()}),
		Options{Labels: map[string]string{testLabel: testRun}, EgressResolver: res, EgressAllowLoopback: true})
	if err != nil {
		t.Fatalf("NewWith() = %v", err)
	}
	t.Cleanup(func() {
		b.Close()
		cleanScope(t, b)
	})
	log := &egresstest.Log{}
	b.ObserveEgress(log.Add)
	return b, log, asked
}

// TestEgressAllowlist proves docker.network allowlist from inside a real container: listed
// names are reachable over HTTP and HTTPS (CONNECT), anything else is refused with a message
// that names the host and the setting, and direct connections, raw TCP and DNS go nowhere.
func TestEgressAllowlist(t *testing.T) {
	in := egresstest.New(t)
	pp, sp, ep := egresstest.Port(in.Pypi), egresstest.Port(in.Secure), egresstest.Port(in.Evil)
	b, log, asked := newEgressBackend(t, in, []string{fmt.Sprintf("pypi.test:%d", pp), fmt.Sprintf("secure.test:%d", sp)})
	if rep := b.Egress(); rep.Status != sandbox.EgressEnforced {
		t.Errorf("Egress() = %+v; want enforced", rep)
	}
	sess := open(t, b, "egress")
	ip := egresstest.HostIP(t)
	getter, err := os.ReadFile(egresstest.Getter(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.(sandbox.FileSystem).WriteFile(ctxT(t, time.Minute), "/tmp/egressget", getter, 0o755); err != nil {
		t.Fatalf("WriteFile(egressget) = %v", err)
	}

	// The proxy variables are there for ordinary tools.
	res := run(t, sess, `echo "$HTTP_PROXY $https_proxy $NO_PROXY"`)
	if got := strings.TrimSpace(res.Stdout); got != "http://127.0.0.1:3128"+" "+"http://127.0.0.1:3128"+" localhost,127.0.0.1,::1" {
		t.Errorf("proxy environment = %q", got)
	}

	// Allowed: plain HTTP by name.
	res = run(t, sess, fmt.Sprintf(`timeout 20 wget -q -O - http://pypi.test:%d/simple/`, pp))
	if res.ExitCode != 0 || res.Stdout != "pypi-index-ok\n" {
		t.Errorf("wget http://pypi.test = exit %d %q %q; want pypi-index-ok", res.ExitCode, res.Stdout, res.Stderr)
	}
	// Allowed: HTTPS through CONNECT (busybox's TLS does not check certificates; the
	// answer can only come from the TLS server).
	res = run(t, sess, fmt.Sprintf(`/tmp/egressget -k https://secure.test:%d/`, sp))
	if res.ExitCode != 0 || res.Stdout != "secure-ok\n" {
		t.Errorf("wget https://secure.test = exit %d %q %q; want secure-ok", res.ExitCode, res.Stdout, res.Stderr)
	}

	// Both went the fast way, over the proxy's unix socket, and the sandbox cannot list the
	// socket directory to find another session's proxy.
	// Under gVisor (runsc) a host unix socket bound into the sandbox cannot be connected to
	// (runsc refuses host unix sockets unless run with --host-uds), so the relay carries them over the exec stream: the
	// allowlist holds all the same, only slower.
	if r := relayOf(t, sess); b.cfg.Runtime == "runsc" {
		if r.viaStream.Load() < 2 || r.viaSock.Load() != 0 {
			t.Errorf("under runsc: connections via the socket %d, via the exec stream %d; want all via the stream", r.viaSock.Load(), r.viaStream.Load())
		}
	} else if r.viaSock.Load() < 2 || r.viaStream.Load() != 0 {
		t.Errorf("connections via the socket %d, via the exec stream %d; want all via the socket", r.viaSock.Load(), r.viaStream.Load())
	}
	res = run(t, sess, `ls /run/hermes-egress`)
	if res.ExitCode == 0 || strings.Contains(res.Stdout, ".sock") {
		t.Errorf("ls /run/hermes-egress = exit %d %q; want it refused", res.ExitCode, res.Stdout)
	}

	// Refused: a name not on the list, with a message naming the host and the key.
	res = run(t, sess, fmt.Sprintf(`timeout 20 wget -q -O - http://evil.test:%d/`, ep))
	if res.ExitCode == 0 || strings.Contains(res.Stdout, "evil-secret") || !strings.Contains(res.Stderr, "403") {
		t.Errorf("wget http://evil.test = exit %d %q %q; want a 403 refusal", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = run(t, sess, fmt.Sprintf(`printf 'GET http://evil.test:%d/ HTTP/1.1\r\nHost: evil.test\r\n\r\n' | nc -w 10 127.0.0.1 3128`, ep))
	if !strings.Contains(res.Stdout, "403 Forbidden") || !strings.Contains(res.Stdout, "egress to evil.test:") || !strings.Contains(res.Stdout, "docker.egress_allow") {
		t.Errorf("raw request for evil.test = %q; want a 403 whose body names evil.test and docker.egress_allow", res.Stdout)
	}
	res = run(t, sess, fmt.Sprintf(`/tmp/egressget -k https://evil.test:%d/`, ep))
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") {
		t.Errorf("egressget https://evil.test (CONNECT) = exit %d %q %q; want a 403 refusal", res.ExitCode, res.Stdout, res.Stderr)
	}

	// The servers are reachable from this host by IP: the failures below are the sandbox's.
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(pp)), 5*time.Second); err != nil {
		t.Fatalf("control: dial %s:%d from the host = %v", ip, pp, err)
	} else {
		c.Close()
	}
	// Direct IP connections, with and without the proxy variables, and raw TCP.
	for _, script := range []string{
		fmt.Sprintf(`timeout 10 wget -q -O - http://%s:%d/simple/`, ip, pp),
		fmt.Sprintf(`(unset http_proxy HTTP_PROXY; timeout 10 wget -q -O - http://%s:%d/simple/)`, ip, pp),
		fmt.Sprintf(`echo hi | nc -w 5 %s %d; echo "nc exit $?"`, ip, ep),
		fmt.Sprintf(`printf 'CONNECT %s:%d HTTP/1.1\r\n\r\n' | nc -w 10 127.0.0.1 3128`, ip, pp),
	} {
		res = run(t, sess, script)
		if strings.Contains(res.Stdout, "pypi-index-ok") || strings.Contains(res.Stdout, "200") || strings.Contains(res.Stdout, "nc exit 0") ||
			(res.ExitCode == 0 && !strings.Contains(res.Stdout, "nc exit") && !strings.Contains(res.Stdout, "403")) {
			t.Errorf("%s = exit %d %q %q; want no connection", script, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	// The kernel has nothing to route with: loopback is the only interface.
	res = run(t, sess, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)
	if strings.TrimSpace(res.Stdout) != "lo" {
		t.Errorf("interfaces = %q; want only lo", res.Stdout)
	}
	// DNS: no resolver is reachable, and the proxy never looks a refused name up.
	res = run(t, sess, `nslookup evil.test; echo "exit $?"; nslookup pypi.test 2>&1 | tail -n 2`)
	if strings.Contains(res.Stdout, "exit 0") || strings.Contains(res.Stdout, "127.0.0.1") || strings.Contains(res.Stdout, ip) {
		t.Errorf("nslookup from inside = %q %q; want failure that learns no address", res.Stdout, res.Stderr)
	}

	// The audit sees both decisions.
	if ev := log.Wait(t, "pypi.test", "allowed"); ev.BytesDown == 0 || ev.Session != "egress" || ev.Port != pp {
		t.Errorf("pypi.test event = %+v; want allowed with bytes, session egress", ev)
	}
	if ev := log.Wait(t, "secure.test", "allowed"); ev.Method != "CONNECT" || ev.BytesDown == 0 {
		t.Errorf("secure.test event = %+v; want an allowed CONNECT with bytes", ev)
	}
	if ev := log.Wait(t, "evil.test", "denied"); ev.Reason == "" {
		t.Errorf("evil.test event = %+v; want denied with a reason", ev)
	}
	log.Wait(t, ip, "denied")
	if slices.Contains(*asked, "evil.test") {
		t.Errorf("the proxy resolved evil.test: %v", *asked)
	}
	if n := in.EvilHits.Load(); n != 0 {
		t.Errorf("evil.test was reached %d times", n)
	}

	// A person changes the live session's allowlist; the next connection follows it.
	evil := fmt.Sprintf("evil.test:%d", ep)
	if _, err := b.SetSessionEgress(ctxT(t, time.Minute), "egress", []string{evil}, nil); err != nil {
		t.Fatalf("SetSessionEgress(allow %s) = %v", evil, err)
	}
	res = run(t, sess, fmt.Sprintf(`timeout 20 wget -q -O - http://evil.test:%d/`, ep))
	if res.Stdout != "evil-secret\n" {
		t.Errorf("after --allow %s: %q %q; want evil-secret", evil, res.Stdout, res.Stderr)
	}
	if _, err := b.SetSessionEgress(ctxT(t, time.Minute), "egress", nil, []string{evil, fmt.Sprintf("pypi.test:%d", pp)}); err != nil {
		t.Fatal(err)
	}
	res = run(t, sess, fmt.Sprintf(`timeout 20 wget -q -O - http://evil.test:%d/ http://pypi.test:%d/simple/; echo "exit $?"`, ep, pp))
	if strings.Contains(res.Stdout, "evil-secret") || strings.Contains(res.Stdout, "pypi-index-ok") {
		t.Errorf("after --deny: %q %q; want both refused", res.Stdout, res.Stderr)
	}
}

func relayOf(t *testing.T, sess sandbox.Session) *relay {
	t.Helper()
	s := sess.(*session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.relay == nil {
		t.Fatal("the session has no relay")
	}
	return s.relay
}

// TestEgressStreamFallback: where the relay cannot reach the proxy's unix socket, its
// connections go over the exec stream, filtered the same.
func TestEgressStreamFallback(t *testing.T) {
	in := egresstest.New(t)
	pp, ep := egresstest.Port(in.Pypi), egresstest.Port(in.Evil)
	b, _, _ := newEgressBackend(t, in, []string{fmt.Sprintf("pypi.test:%d", pp)})
	sess := open(t, b, "fallback")
	run(t, sess, "true") // the relay starts with the session's helper
	r := relayOf(t, sess)
	if err := os.Remove(r.sock.(*sockListener).path); err != nil {
		t.Fatal(err)
	}
	res := run(t, sess, fmt.Sprintf(`timeout 20 wget -q -O - http://pypi.test:%d/simple/`, pp))
	if res.ExitCode != 0 || res.Stdout != "pypi-index-ok\n" {
		t.Errorf("wget http://pypi.test over the stream = exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = run(t, sess, fmt.Sprintf(`timeout 20 wget -q -O - http://evil.test:%d/`, ep))
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "403") {
		t.Errorf("wget http://evil.test over the stream = exit %d %q %q; want a 403", res.ExitCode, res.Stdout, res.Stderr)
	}
	if r.viaStream.Load() < 2 || r.viaSock.Load() != 0 {
		t.Errorf("connections via the exec stream %d, via the socket %d; want all via the stream", r.viaStream.Load(), r.viaSock.Load())
	}
}

// TestEgressRelayEndsWithTheSession: when the process holding a session lets go of it, the
// relay inside the container ends, so nothing listens for the way out any more.
func TestEgressRelayEndsWithTheSession(t *testing.T) {
	in := egresstest.New(t)
	b, _, _ := newEgressBackend(t, in, []string{fmt.Sprintf("pypi.test:%d", egresstest.Port(in.Pypi))})
	sess, err := b.Open(ctxT(t, time.Minute), "held")
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, sess, fmt.Sprintf(`wget -q -O - http://pypi.test:%d/simple/`, egresstest.Port(in.Pypi)))
	if res.Stdout != "pypi-index-ok\n" {
		t.Fatalf("through the relay: %q %q", res.Stdout, res.Stderr)
	}
	s := sess.(*session)
	s.mu.Lock()
	execID := s.relay.execID
	s.mu.Unlock()
	ctx := ctxT(t, time.Minute)
	if ei, err := b.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{}); err != nil || !ei.Running {
		t.Fatalf("relay exec before Close: %+v, %v; want running", ei, err)
	}
	sess.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ei, err := b.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err == nil && !ei.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay exec still running 30s after the session closed: %+v, %v", ei, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEgressNoneHasNoRelay: with docker.network none nothing listens on the relay port and
// the proxy variables are not set.
func TestEgressNoneHasNoRelay(t *testing.T) {
	b := newBackend(t, nil)
	if rep := b.Egress(); rep.Status != sandbox.EgressNone {
		t.Errorf("Egress() = %+v; want none", rep)
	}
	sess := open(t, b, "none")
	res := run(t, sess, `echo "[$HTTP_PROXY]"; echo x | nc -w 3 127.0.0.1 3128; echo "nc exit $?"`)
	if !strings.Contains(res.Stdout, "[]") || strings.Contains(res.Stdout, "nc exit 0") {
		t.Errorf("network none: %q %q; want no proxy variables and nothing on 3128", res.Stdout, res.Stderr)
	}
	if _, err := b.SetSessionEgress(ctxT(t, time.Minute), "none", []string{"pypi.org"}, nil); err == nil {
		t.Error("SetSessionEgress with docker.network none = nil; want an error")
	}
}

// BenchmarkEgressDownload100MB downloads 100 MB with busybox wget from inside a container:
// through the relay and proxy (docker.network allowlist) and, in the same run, directly
// from a container with docker.network open (to this host's address).
//
//	go test -run '^$' -bench EgressDownload -benchtime 5x ./backends/docker/
func BenchmarkEgressDownload100MB(b *testing.B) {
	in := egresstest.New(b)
	pp, sp := egresstest.Port(in.Pypi), egresstest.Port(in.Secure)
	const size = 100 << 20
	img := testImage(b)
	getter, err := os.ReadFile(egresstest.Getter(b))
	if err != nil {
		b.Fatal(err)
	}
	mk := func(mode config.NetworkMode, allow []string) *Backend {
		return newBackendWith(b, b.TempDir(), func(c *config.Config) {
			c.Docker.Image = img
			c.Docker.Network = mode
			c.Docker.EgressAllow = allow
		})
	}
	fetch := func(sess sandbox.Session, script string) time.Duration {
		start := time.Now()
		res := run(b, sess, script+" >/dev/null && echo ok")
		if res.Stdout != "ok\n" {
			b.Fatalf("%s = %d %q %q", script, res.ExitCode, res.Stdout, res.Stderr)
		}
		return time.Since(start)
	}
	ip := ""
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			ip = n.IP.String()
			break
		}
	}
	// The raw baseline: a container with an open network fetching the server by IP.
	direct := open(b, mk(config.NetworkOpen, nil), "direct")
	be := mk(config.NetworkAllowlist, []string{fmt.Sprintf("pypi.test:%d", pp), fmt.Sprintf("secure.test:%d", sp)})
	be.extra.EgressResolver, be.extra.EgressAllowLoopback = in.Resolver, true
	relayed := open(b, be, "relay")
	for _, sess := range []sandbox.Session{direct, relayed} {
		if err := sess.(sandbox.FileSystem).WriteFile(ctxT(b, time.Minute), "/tmp/egressget", getter, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct{ name, direct, relayed string }{
		// busybox wget, plain HTTP (the proxy forwards the request)
		{"http", fmt.Sprintf("wget -q -O - http://%s:%d/bytes/%d", ip, pp, size), fmt.Sprintf("wget -q -O - http://pypi.test:%d/bytes/%d", pp, size)},
		// HTTPS, as pip and npm fetch (the proxy tunnels CONNECT)
		{"https", fmt.Sprintf("/tmp/egressget -k https://%s:%d/bytes/%d", ip, sp, size), fmt.Sprintf("/tmp/egressget -k https://secure.test:%d/bytes/%d", sp, size)},
	} {
		b.Run(c.name, func(b *testing.B) {
			fetch(direct, c.direct) // warm both
			fetch(relayed, c.relayed)
			var dt, rt time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ { // alternated, so both see the same load
				dt += fetch(direct, c.direct)
				rt += fetch(relayed, c.relayed)
			}
			mb := float64(size) * float64(b.N) / 1e6
			b.ReportMetric(mb/dt.Seconds(), "direct-MB/s")
			b.ReportMetric(mb/rt.Seconds(), "relay-MB/s")
			b.ReportMetric(100*dt.Seconds()/rt.Seconds(), "relay-%")
		})
	}
}
