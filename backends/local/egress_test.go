//go:build !windows

package local_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/nsbox"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// egressNetwork is what a local session's network needs: namespaces and python3 (the
// probes' HTTP client honours HTTP_PROXY, as pip and most tools do).
func egressNetwork(t *testing.T) {
	t.Helper()
	if err := nsbox.Probe(nsbox.NetworkAllowlist); err != nil {
		testenv.Missing(t, "nsbox", err.Error())
	}
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Missing(t, "python3", err.Error())
	}
}

// newAllowlistBackend is a local backend with local.network allowlist whose proxy resolves
// the stand-in internet's names.
func newAllowlistBackend(t *testing.T, in *egresstest.Internet, mode config.Confine, allow []string) (sandbox.Backend, *egresstest.Log, *[]string, string) {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "hermes-local-egress-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	work := filepath.Join(root, "work")
	must(t, os.MkdirAll(work, 0o755))
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = work
	cfg.Local.Confine = mode
	cfg.Local.Network = config.LocalNetworkAllowlist
	cfg.Local.EgressAllow = allow
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	asked := &[]string{}
	res := in.Resolver
	res.Asked = func(n string) { mu.Lock(); *asked = append(*asked, n); mu.Unlock() }
	sec := local.SectionOf(cfg)
	sec.EgressResolver, sec.EgressAllowLoopback = res, true
	b, log := newObserved(t, sec, cfg, root)
	return b, log, asked, work
}

// newObserved makes the local backend of sec in root/state, with the tests' PATH and HOME and
// closed when the test ends, and the log its egress decisions go to.
func newObserved(t *testing.T, sec local.Section, cfg *config.Config, root string) (sandbox.Backend, *egresstest.Log) {
	t.Helper()
	b, err := local.NewWith(sec, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(root, "state"),
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root}, Logger: testenv.Logger()}))
	if err != nil {
		t.Fatalf("NewWith() = %v", err)
	}
	t.Cleanup(func() { b.Close() })
	log := &egresstest.Log{}
	b.(sandbox.EgressObserver).ObserveEgress(log.Add)
	return b, log
}

// pyGet fetches url with python3's urllib, through the proxy variables unless direct.
func pyGet(url string, direct bool) string {
	opener := "urllib.request.build_opener()"
	if direct {
		opener = "urllib.request.build_opener(urllib.request.ProxyHandler({}))"
	}
	return fmt.Sprintf(`python3 -c "import sys,urllib.request
try:
    sys.stdout.write(%s.open('%s',timeout=10).read().decode())
except Exception as e:
    sys.stderr.write(str(e)); sys.exit(1)"`, opener, url)
}

// TestEgressAllowlist proves local.network allowlist from inside a session's network
// namespace, with no gate in front: listed names are reachable over HTTP and HTTPS (CONNECT)
// through the proxy and audited, anything else is refused by name, and direct connections
// to the host's loopback, where the servers listen, go nowhere.
func TestEgressAllowlist(t *testing.T) {
	t.Parallel()
	egressNetwork(t)
	in := egresstest.New(t)
	pp, sp, ep := egresstest.Port(in.Pypi), egresstest.Port(in.Secure), egresstest.Port(in.Evil)
	b, log, asked, _ := newAllowlistBackend(t, in, config.ConfineStrict, []string{fmt.Sprintf("pypi.test:%d", pp), fmt.Sprintf("secure.test:%d", sp)})
	if rep := b.(sandbox.EgressReporter).Egress(); rep.Status != sandbox.EgressEnforced {
		t.Errorf("Egress() = %+v; want enforced", rep)
	}
	sess := testenv.Open(t, b, "egress")
	run := func(script string) *sandbox.Result { return testenv.Run(t, sess, script) }

	res := run(`echo "$HTTP_PROXY $https_proxy"`)
	if got := strings.TrimSpace(res.Stdout); got != "http://127.0.0.1:3128 http://127.0.0.1:3128" {
		t.Errorf("proxy environment = %q", got)
	}
	// Allowed: plain HTTP by name, and HTTPS through CONNECT.
	if res = run(pyGet(fmt.Sprintf("http://pypi.test:%d/simple/", pp), false)); res.ExitCode != 0 || res.Stdout != "pypi-index-ok\n" {
		t.Errorf("GET http://pypi.test = exit %d %q %q; want pypi-index-ok", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res = run(fmt.Sprintf(`%s -k https://secure.test:%d/`, egresstest.Getter(t), sp)); res.ExitCode != 0 || res.Stdout != "secure-ok\n" {
		t.Errorf("GET https://secure.test = exit %d %q %q; want secure-ok", res.ExitCode, res.Stdout, res.Stderr)
	}
	// Refused: a name not on the list, with a 403 that names it and the setting.
	if res = run(pyGet(fmt.Sprintf("http://evil.test:%d/", ep), false)); res.ExitCode == 0 || strings.Contains(res.Stdout, "evil-secret") || !strings.Contains(res.Stderr, "403") {
		t.Errorf("GET http://evil.test = exit %d %q %q; want a 403 refusal", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = run(fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'GET http://evil.test:%d/ HTTP/1.0\r\nHost: evil.test\r\n\r\n' >&3 && cat <&3`, ep))
	if !strings.Contains(res.Stdout, "403 Forbidden") || !strings.Contains(res.Stdout, "local.egress_allow") {
		t.Errorf("raw request for evil.test = %q %q; want a 403 naming local.egress_allow", res.Stdout, res.Stderr)
	}
	// Control: the servers answer on this host's loopback.
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", pp), 5*time.Second)
	if err != nil {
		t.Fatalf("control: dial the server from the host = %v", err)
	}
	c.Close()
	// Direct: the session's loopback is its own, so the host's servers are not there.
	for _, script := range []string{
		pyGet(fmt.Sprintf("http://127.0.0.1:%d/simple/", pp), true),
		fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && echo hi >&3 && cat <&3`, ep),
		fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'CONNECT 127.0.0.1:%d HTTP/1.0\r\n\r\n' >&3 && cat <&3`, pp),
	} {
		res = run(script)
		if strings.Contains(res.Stdout, "pypi-index-ok") || strings.Contains(res.Stdout, "evil-secret") || strings.Contains(res.Stdout, " 200 ") {
			t.Errorf("%s = exit %d %q %q; want no connection", script, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	if res = run(`tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`); strings.TrimSpace(res.Stdout) != "lo" {
		t.Errorf("interfaces = %q; want only lo", res.Stdout)
	}
	// The audit sees both decisions; a refused name is never looked up.
	if ev := log.Wait(t, "pypi.test", "allowed"); ev.BytesDown == 0 || ev.Session != "egress" || ev.Port != pp || ev.Backend != "local" {
		t.Errorf("pypi.test event = %+v; want allowed with bytes, session egress, backend local", ev)
	}
	if ev := log.Wait(t, "secure.test", "allowed"); ev.Method != "CONNECT" {
		t.Errorf("secure.test event = %+v; want an allowed CONNECT", ev)
	}
	log.Wait(t, "evil.test", "denied")
	log.Wait(t, "127.0.0.1", "denied")
	if slices.Contains(*asked, "evil.test") {
		t.Errorf("the proxy resolved evil.test: %v", *asked)
	}
	if n := in.EvilHits.Load(); n != 0 {
		t.Errorf("evil.test was reached %d times", n)
	}
	// A person changes the live session's allowlist (sessions network --allow); the next
	// connection follows it.
	evil := fmt.Sprintf("evil.test:%d", ep)
	sm := b.(interface {
		SetSessionEgress(context.Context, string, []string, []string) ([]string, error)
	})
	if _, err := sm.SetSessionEgress(testenv.Ctx(t, time.Minute), "egress", []string{evil}, nil); err != nil {
		t.Fatalf("SetSessionEgress(allow %s) = %v", evil, err)
	}
	if res = run(pyGet(fmt.Sprintf("http://evil.test:%d/", ep), false)); res.Stdout != "evil-secret\n" {
		t.Errorf("after --allow %s: %q %q; want evil-secret", evil, res.Stdout, res.Stderr)
	}
}

// TestNetworkNoneHasNoWayOut: with local.network none nothing answers on the relay's port,
// the sessions network command is refused, and the egress report says none.
func TestNetworkNoneHasNoWayOut(t *testing.T) {
	egressNetwork(t)
	root, err := os.MkdirTemp("/var/tmp", "hermes-local-none-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = root
	cfg.Local.Network = config.LocalNetworkNone
	b, err := local.NewWith(local.SectionOf(cfg), cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(root, ".state"),
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root}}))
	must(t, err)
	t.Cleanup(func() { b.Close() })
	if rep := b.(sandbox.EgressReporter).Egress(); rep.Status != sandbox.EgressNone {
		t.Errorf("Egress() = %+v; want none", rep)
	}
	if b.Capabilities().Network {
		t.Error("Capabilities().Network = true with local.network none")
	}
	sess := testenv.Open(t, b, "none")
	res := testenv.Run(t, sess, `exec 3<>/dev/tcp/127.0.0.1/3128 && echo connected; python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));s.listen();c=socket.create_connection(s.getsockname());print('loopback ok')"`)
	if strings.Contains(res.Stdout, "connected") || !strings.Contains(res.Stdout, "loopback ok") {
		t.Errorf("network none = %q %q; want no relay, and a working loopback of the session's own", res.Stdout, res.Stderr)
	}
	sm := b.(interface {
		SetSessionEgress(context.Context, string, []string, []string) ([]string, error)
	})
	if _, err := sm.SetSessionEgress(testenv.Ctx(t, time.Minute), "none", []string{"pypi.org"}, nil); err == nil {
		t.Error("SetSessionEgress with local.network none = nil; want an error")
	}
}
