package local_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestSeatbeltSessionOnMac opens local sessions as a Mac user gets them (the helper under
// /usr/bin/sandbox-exec with the session's profile) and checks from inside that commands are
// confined: with local.confine strict a write in the working directory works and one
// elsewhere in the home directory fails, the state directory cannot be written, a deny_read
// file cannot be read; with local.network none a listening loopback port cannot be reached;
// with allowlist a listed name is fetched through the session's proxy and a direct connection
// fails. Each check first proves the thing is there to deny. scripts/verify-macos.sh runs it.
func TestSeatbeltSessionOnMac(t *testing.T) {
	if _, err := os.Stat(local.SandboxExec); err != nil {
		t.Skipf("no %s: %v", local.SandboxExec, err)
	}
	home, err := os.UserHomeDir()
	must(t, err)
	// Outside the temporary directories, which every profile lets commands write.
	root, err := os.MkdirTemp(home, ".hermes-sandbox-seatbelt-test-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	root, err = filepath.EvalSymlinks(root)
	must(t, err)
	work, outside, secret, state := filepath.Join(root, "work"), filepath.Join(root, "outside"),
		filepath.Join(root, "secret"), filepath.Join(root, "state")
	for _, d := range []string{work, outside, secret, state} {
		must(t, os.MkdirAll(d, 0o700))
	}
	must(t, os.WriteFile(filepath.Join(secret, "key"), []byte("s3cret"), 0o600))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("listening\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	in := egresstest.New(t)
	pp := egresstest.Port(in.Pypi)

	open := func(network config.LocalNetwork, name string) sandbox.Session {
		cfg := config.NewConfig()
		cfg.Terminal.Cwd = work
		cfg.Local.Confine, cfg.Local.Network = config.ConfineStrict, network
		cfg.Local.DenyRead = []string{secret}
		if network == config.LocalNetworkAllowlist {
			cfg.Local.EgressAllow = []string{fmt.Sprintf("pypi.test:%d", pp)}
		}
		must(t, cfg.Validate())
		sec := local.SectionOf(cfg)
		sec.EgressResolver, sec.EgressAllowLoopback = in.Resolver, true
		b, err := local.NewWith(sec, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state,
			Environ: []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "HOME=" + home}}))
		if err != nil {
			t.Fatalf("FAIL start a session with local.network %s: %v", network, err)
		}
		t.Cleanup(func() { b.Close() })
		return testenv.Open(t, b, name)
	}
	q := func(p string) string { return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'" }
	connect := "/usr/bin/nc -w 3 127.0.0.1 " + strconv.Itoa(port) + " </dev/null"
	if out, err := runHost("/bin/sh", "-c", connect); err != nil || !strings.Contains(out, "listening") {
		t.Fatalf("the port does not answer outside the sandbox: %v %q", err, out)
	}
	checks := []struct {
		network config.LocalNetwork
		name    string
		script  string
		allow   bool
		want    string // in stdout when allowed
	}{
		{config.LocalNetworkNone, "write in the working directory", "echo ok > " + q(filepath.Join(work, "f")) + " && cat " + q(filepath.Join(work, "f")), true, "ok"},
		{config.LocalNetworkNone, "write elsewhere in the home directory", "echo no > " + q(filepath.Join(outside, "f")), false, ""},
		{config.LocalNetworkNone, "write in this tool's state directory", "echo no > " + q(filepath.Join(state, "planted")), false, ""},
		{config.LocalNetworkNone, "read a deny_read file", "cat " + q(filepath.Join(secret, "key")), false, ""},
		{config.LocalNetworkNone, "connect to loopback with network none", connect + " | grep listening", false, ""},
		{config.LocalNetworkAllowlist, "fetch a listed name through the session's proxy",
			fmt.Sprintf("/usr/bin/curl -sS --max-time 10 http://pypi.test:%d/simple/", pp), true, "pypi-index-ok"},
		{config.LocalNetworkAllowlist, "connect to loopback directly with allowlist", connect + " | grep listening", false, ""},
	}
	sessions := map[config.LocalNetwork]sandbox.Session{}
	for _, c := range checks {
		sess := sessions[c.network]
		if sess == nil {
			sess = open(c.network, "mac-"+string(c.network))
			sessions[c.network] = sess
		}
		res := testenv.Run(t, sess, c.script)
		ok := res.ExitCode == 0 && strings.Contains(res.Stdout, c.want)
		switch {
		case c.allow && !ok:
			t.Errorf("FAIL %s: refused: exit %d %q %q", c.name, res.ExitCode, res.Stdout, res.Stderr)
		case !c.allow && res.ExitCode == 0:
			t.Errorf("FAIL %s: allowed: %q", c.name, res.Stdout)
		default:
			t.Logf("PASS %s", c.name)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "planted")); err == nil {
		t.Errorf("FAIL a command planted a file in the state directory")
	}
}

// runHost runs a command outside any sandbox.
func runHost(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
