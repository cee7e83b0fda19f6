package kubernetes

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestEgressAllowlist proves kubernetes.network allowlist from inside a pod of a real API
// server on the fake node (which, like a NetworkPolicy-enforcing CNI, gives a pod selected by
// the deny-all-egress policy nothing but loopback): listed names are reachable over HTTP and
// HTTPS through the relay exec and this process's proxy, anything else is refused with a 403
// naming the host and the setting, direct connections go nowhere, every decision reaches the
// observer, and a person's `sessions network --allow` applies to the next connection.
func TestEgressAllowlist(t *testing.T) {
	in := egresstest.New(t)
	pp, sp, ep := egresstest.Port(in.Pypi), egresstest.Port(in.Secure), egresstest.Port(in.Evil)
	c := newCluster(t)
	var mu sync.Mutex
	var asked []string
	res := in.Resolver
	res.Asked = func(n string) { mu.Lock(); asked = append(asked, n); mu.Unlock() }
	b := c.backendWith(t, "", func(cfg *config.Config) {
		cfg.Kubernetes.Network = config.NetworkAllowlist
		cfg.Kubernetes.EgressAllow = []string{fmt.Sprintf("pypi.test:%d", pp), fmt.Sprintf("secure.test:%d", sp)}
	}, Options{EgressResolver: res, EgressAllowLoopback: true})
	log := &egresstest.Log{}
	b.ObserveEgress(log.Add)
	if rep := b.Egress(); rep.Status != sandbox.EgressEnforced || !strings.Contains(rep.Detail, "deny-all-egress NetworkPolicy") ||
		!strings.Contains(rep.Detail, "NOT blocked") || !slices.Equal(rep.Allow, b.cfg.EgressAllow) {
		t.Errorf("Egress() = %+v; want enforced, naming the NetworkPolicy and the CNI caveat", rep)
	}
	ctx := testenv.Ctx(t, 3*time.Minute)
	sess := testenv.Open(t, b, "egress")
	ip := egresstest.HostIP(t)

	// The pod is selected by the deny-all policy and has only loopback; the proxy variables
	// are there for ordinary tools.
	r := testenv.Run(t, sess, `ls /sys/class/net | tr '\n' ' '; echo "$HTTP_PROXY $https_proxy $NO_PROXY"`)
	if want := "lo " + "http://127.0.0.1:3128" + " " + "http://127.0.0.1:3128" + " localhost,127.0.0.1,::1\n"; r.Stdout != want {
		t.Errorf("interfaces and proxy environment = %q; want %q", r.Stdout, want)
	}
	pods := c.sessionPods(t, b, "egress")
	if len(pods) != 1 || pods[0].Labels[labelEgress] != "deny" {
		t.Fatalf("the session's pods: %d, labels %v; want one selected by the deny-all policy", len(pods), pods[0].Labels)
	}
	getter, err := os.ReadFile(egresstest.Getter(t))
	if err != nil {
		t.Fatal(err)
	}
	const get = hermesDir + "/egressget"
	if err := sess.(sandbox.FileSystem).WriteFile(ctx, get, getter, 0o755); err != nil {
		t.Fatalf("WriteFile(egressget) = %v", err)
	}

	// Allowed: plain HTTP by name, and HTTPS through CONNECT (the answer can only come
	// from the TLS server).
	r = testenv.Run(t, sess, fmt.Sprintf(`timeout 20 wget -q -O - http://pypi.test:%d/simple/`, pp))
	if r.ExitCode != 0 || r.Stdout != "pypi-index-ok\n" {
		t.Errorf("wget http://pypi.test = exit %d %q %q; want pypi-index-ok", r.ExitCode, r.Stdout, r.Stderr)
	}
	r = testenv.Run(t, sess, fmt.Sprintf(`%s -k https://secure.test:%d/`, get, sp))
	if r.ExitCode != 0 || r.Stdout != "secure-ok\n" {
		t.Errorf("egressget https://secure.test = exit %d %q %q; want secure-ok", r.ExitCode, r.Stdout, r.Stderr)
	}
	s := sess.(*session)
	s.mu.Lock()
	rl := s.relay
	s.mu.Unlock()
	if rl == nil || rl.served.Load() < 2 {
		t.Fatalf("the session's relay = %v; want it to have carried both connections", rl)
	}

	// Refused: a name not on the list, with a message naming the host and the key.
	r = testenv.Run(t, sess, fmt.Sprintf(`timeout 20 wget -q -O - http://evil.test:%d/`, ep))
	if r.ExitCode == 0 || strings.Contains(r.Stdout, "evil-secret") || !strings.Contains(r.Stderr, "403") {
		t.Errorf("wget http://evil.test = exit %d %q %q; want a 403 refusal", r.ExitCode, r.Stdout, r.Stderr)
	}
	r = testenv.Run(t, sess, fmt.Sprintf(`printf 'GET http://evil.test:%d/ HTTP/1.1\r\nHost: evil.test\r\n\r\n' | nc -w 10 127.0.0.1 3128`, ep))
	if !strings.Contains(r.Stdout, "403 Forbidden") || !strings.Contains(r.Stdout, "egress to evil.test:") || !strings.Contains(r.Stdout, "kubernetes.egress_allow") {
		t.Errorf("raw request for evil.test = %q; want a 403 whose body names evil.test and kubernetes.egress_allow", r.Stdout)
	}
	r = testenv.Run(t, sess, fmt.Sprintf(`%s -k https://evil.test:%d/`, get, ep))
	if r.ExitCode == 0 || !strings.Contains(r.Stderr, "Forbidden") {
		t.Errorf("egressget https://evil.test (CONNECT) = exit %d %q %q; want a 403 refusal", r.ExitCode, r.Stdout, r.Stderr)
	}

	// The servers are reachable from this host by IP: the failures below are the sandbox's.
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(pp)), 5*time.Second); err != nil {
		t.Fatalf("control: dial %s:%d from the host = %v", ip, pp, err)
	} else {
		conn.Close()
	}
	for _, script := range []string{
		fmt.Sprintf(`timeout 10 wget -q -O - http://%s:%d/simple/`, ip, pp),
		fmt.Sprintf(`(unset http_proxy HTTP_PROXY; timeout 10 wget -q -O - http://%s:%d/simple/)`, ip, pp),
		fmt.Sprintf(`echo hi | nc -w 5 %s %d; echo "nc exit $?"`, ip, ep),
	} {
		r = testenv.Run(t, sess, script)
		if strings.Contains(r.Stdout, "pypi-index-ok") || strings.Contains(r.Stdout, "nc exit 0") ||
			(r.ExitCode == 0 && !strings.Contains(r.Stdout, "nc exit")) {
			t.Errorf("%s = exit %d %q %q; want no connection", script, r.ExitCode, r.Stdout, r.Stderr)
		}
	}

	// The observer (the audit log's feed) sees both decisions.
	if ev := log.Wait(t, "pypi.test", "allowed"); ev.BytesDown == 0 || ev.Session != "egress" || ev.Port != pp || ev.Backend != Name {
		t.Errorf("pypi.test event = %+v; want allowed with bytes, session egress, backend kubernetes", ev)
	}
	if ev := log.Wait(t, "secure.test", "allowed"); ev.Method != "CONNECT" || ev.BytesDown == 0 {
		t.Errorf("secure.test event = %+v; want an allowed CONNECT with bytes", ev)
	}
	if ev := log.Wait(t, "evil.test", "denied"); ev.Reason == "" {
		t.Errorf("evil.test event = %+v; want denied with a reason", ev)
	}
	log.Wait(t, ip, "denied")
	mu.Lock()
	if slices.Contains(asked, "evil.test") {
		t.Errorf("the proxy resolved evil.test: %v", asked)
	}
	mu.Unlock()
	if n := in.EvilHits.Load(); n != 0 {
		t.Errorf("evil.test was reached %d times", n)
	}

	// A person changes the live session's allowlist; the next connection follows it.
	evil := fmt.Sprintf("evil.test:%d", ep)
	now, err := b.SetSessionEgress(ctx, "egress", []string{evil}, nil)
	if err != nil || !slices.Contains(now, evil) {
		t.Fatalf("SetSessionEgress(allow %s) = %v, %v", evil, now, err)
	}
	r = testenv.Run(t, sess, fmt.Sprintf(`timeout 20 wget -q -O - http://evil.test:%d/`, ep))
	if r.Stdout != "evil-secret\n" {
		t.Errorf("after --allow %s: %q %q; want evil-secret", evil, r.Stdout, r.Stderr)
	}
	if _, err := b.SetSessionEgress(ctx, "egress", nil, []string{evil, fmt.Sprintf("pypi.test:%d", pp)}); err != nil {
		t.Fatal(err)
	}
	r = testenv.Run(t, sess, fmt.Sprintf(`timeout 20 wget -q -O - http://evil.test:%d/ http://pypi.test:%d/simple/; echo "exit $?"`, ep, pp))
	if strings.Contains(r.Stdout, "evil-secret") || strings.Contains(r.Stdout, "pypi-index-ok") {
		t.Errorf("after --deny: %q %q; want both refused", r.Stdout, r.Stderr)
	}
	if _, err := b.SetSessionEgress(ctx, "nosuch", []string{"pypi.org"}, nil); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("SetSessionEgress(nosuch) = %v; want ErrNotFound", err)
	}

	// A relay whose exec was cut (as an API server or kubelet may cut an idle stream) is
	// started again before the next command, which then gets out as before.
	rl.ms.Close()
	select {
	case <-rl.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the relay exec still streams 30s after its stream was closed")
	}
	r = testenv.Run(t, sess, fmt.Sprintf(`%s -k https://secure.test:%d/`, get, sp))
	if r.ExitCode != 0 || r.Stdout != "secure-ok\n" {
		t.Errorf("after the relay was cut: egressget https://secure.test = exit %d %q %q; want secure-ok", r.ExitCode, r.Stdout, r.Stderr)
	}
	s.mu.Lock()
	rl2 := s.relay
	s.mu.Unlock()
	if rl2 == nil || rl2 == rl || rl2.served.Load() != 1 {
		t.Errorf("after the relay was cut: relay %p (was %p); want a new one that carried the next connection", rl2, rl)
	}

	// Closing the session ends the relay exec: its stream to this process is gone.
	sess.Close()
	select {
	case <-rl2.done:
	case <-time.After(30 * time.Second):
		t.Error("the relay exec still streams 30s after the session closed")
	}
}

// TestEgressRelayFailure: a relay that cannot start is an error that says so, and a pod the
// deny-all policy does not select (made while the network was open) runs no command with
// allowlist: never a session left with an open way out while the report says enforced.
func TestEgressRelayFailure(t *testing.T) {
	c := newCluster(t)
	state := t.TempDir()
	b := c.backend(t, state, func(cfg *config.Config) { cfg.Kubernetes.Network = config.NetworkAllowlist })
	ctx := testenv.Ctx(t, 2*time.Minute)
	_, err := b.startRelay(ctx, "no-such-pod", "x")
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "relay") {
		t.Errorf("startRelay(no-such-pod) = %v; want ErrUnavailable naming the relay", err)
	}

	open := c.backend(t, state, func(cfg *config.Config) { cfg.Kubernetes.Network = config.NetworkOpen })
	if r := testenv.Run(t, testenv.Open(t, open, "was-open"), "ls /sys/class/net | grep -c -v '^lo$'"); strings.TrimSpace(r.Stdout) == "0" {
		t.Fatalf("control: the open pod has no interface but lo (%q)", r.Stdout)
	}
	_, err = testenv.Open(t, b, "was-open").Exec(ctx, sandbox.Command{Script: "echo ran"})
	if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "sessions rm was-open") {
		t.Errorf("allowlist on a pod made open = %v; want ErrInvalidConfig saying to remove the session", err)
	}
}

// TestEgressNoneHasNoRelay: with kubernetes.network none nothing listens on the relay port,
// the proxy variables are not set and there is no allowlist to change.
func TestEgressNoneHasNoRelay(t *testing.T) {
	c := newCluster(t)
	b := c.backend(t, "", nil)
	if rep := b.Egress(); rep.Status != sandbox.EgressNone {
		t.Errorf("Egress() = %+v; want none", rep)
	}
	sess := testenv.Open(t, b, "none")
	r := testenv.Run(t, sess, `echo "[$HTTP_PROXY]"; echo x | nc -w 3 127.0.0.1 3128; echo "nc exit $?"`)
	if !strings.Contains(r.Stdout, "[]") || strings.Contains(r.Stdout, "nc exit 0") {
		t.Errorf("network none: %q %q; want no proxy variables and nothing on 3128", r.Stdout, r.Stderr)
	}
	if _, err := b.SetSessionEgress(testenv.Ctx(t, time.Minute), "none", []string{"pypi.org"}, nil); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("SetSessionEgress with kubernetes.network none = %v; want ErrUnsupported", err)
	}
}
