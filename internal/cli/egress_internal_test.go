//go:build unix

package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/internal/nsbox"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestEgressAuditShow: egress decisions become egress records that `audit show --kind
// egress` lists, with host, port, bytes and decision, apart from calls; the log still
// verifies.
func TestEgressAuditShow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	log, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := egressAuditor(log, nil)
	rec(sandbox.EgressEvent{Session: "s1", Backend: "docker", Method: "CONNECT", Host: "pypi.test", Port: 443, Decision: "allowed",
		BytesUp: 517, BytesDown: 4096, Duration: 30 * time.Millisecond})
	rec(sandbox.EgressEvent{Session: "s1", Backend: "docker", Method: "GET", Host: "evil.test", Port: 80, Decision: "denied",
		Reason: "not on the allowlist"})
	rec(sandbox.EgressEvent{Session: "s2", Backend: "docker", Method: "GET", Host: "other.test", Port: 80, Decision: "denied", Reason: "x"})
	if _, err := log.Intent(context.Background(), audit.Record{Type: audit.TypeIntent, Session: "s1", Tool: audit.ToolExec, Command: "echo hi", Decision: audit.DecisionDenied}); err != nil {
		t.Fatal(err)
	}
	log.Close()
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := RunWith(context.Background(), append([]string{"audit", "--file", path}, args...), strings.NewReader(""), &out, &errb,
			[]string{"HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_STATE_HOME=" + dir})
		return code, out.String(), errb.String()
	}
	code, out, errOut := run("show", "--kind", "egress")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("audit show --kind egress = %d %q %q; want three egress lines", code, out, errOut)
	}
	if !strings.Contains(lines[0], "allowed") || !strings.Contains(lines[0], "CONNECT pypi.test:443") || !strings.Contains(lines[0], "up=517 down=4096") {
		t.Errorf("allowed line = %q", lines[0])
	}
	if !strings.Contains(lines[1], "denied") || !strings.Contains(lines[1], "GET evil.test:80") || !strings.Contains(lines[1], "not on the allowlist") {
		t.Errorf("denied line = %q", lines[1])
	}
	if strings.Contains(out, "echo hi") {
		t.Errorf("--kind egress shows a call: %q", out)
	}
	code, out, _ = run("show", "--kind", "egress", "--session", "s1", "--json")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"host":"evil.test"`) || !strings.Contains(out, `"bytes_down":4096`) {
		t.Errorf("audit show --kind egress --session s1 --json = %d %q", code, out)
	}
	if code, _, errOut := run("show", "--kind", "nope"); code == 0 || !strings.Contains(errOut, "egress") {
		t.Errorf("audit show --kind nope = %d %q; want a usage error listing the kinds", code, errOut)
	}
	if code, out, errOut := run("verify"); code != 0 {
		t.Errorf("audit verify after egress records = %d %q %q", code, out, errOut)
	}
}

// TestSharedEgressNotPretended: terminal.egress_allow on a backend that cannot enforce it
// is an error, never a silent run with an open network.
func TestSharedEgressNotPretended(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "XDG_CONFIG_HOME=" + filepath.Join(dir, "c"), "XDG_STATE_HOME=" + filepath.Join(dir, "s"),
		"HERMES_SANDBOX_TERMINAL_CWD=" + dir}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := RunWith(context.Background(), args, strings.NewReader(""), &out, &errb, env)
		return code, out.String() + errb.String()
	}
	// local.network host: local enforces an allowlist only in a network namespace of its own.
	for _, args := range [][]string{{"config", "set", "sandbox", "local"}, {"config", "set", "local.network", "host"}, {"config", "set", "terminal.egress_allow", "[pypi.org]"}} {
		if code, out := run(args...); code != 0 {
			t.Fatalf("%v = %d %s", args, code, out)
		}
	}
	code, out := run("exec", "-c", "echo ran")
	if code == 0 || strings.Contains(out, "ran\n") || !strings.Contains(out, "terminal.egress_allow") || !strings.Contains(out, "not available") {
		t.Errorf("exec on local with terminal.egress_allow = %d %q; want a refusal naming the key and \"not available\"", code, out)
	}
	code, out = run("doctor")
	if !strings.Contains(out, "egress") || !strings.Contains(out, "not available") {
		t.Errorf("doctor = %d %q; want the egress status", code, out)
	}
}

// TestSessionsNetworkNeedsDockerAllowlist: on a backend (here local with its default network,
// the host's) without a per-session allowlist the command says so instead of doing nothing.
func TestSessionsNetworkNeedsDockerAllowlist(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "XDG_CONFIG_HOME=" + filepath.Join(dir, "c"), "XDG_STATE_HOME=" + filepath.Join(dir, "s"),
		"HERMES_SANDBOX_TERMINAL_CWD=" + dir, "HERMES_SANDBOX_SANDBOX=local"}
	var out, errb bytes.Buffer
	code := RunWith(context.Background(), []string{"sessions", "network", "default", "--allow", "pypi.org"}, strings.NewReader(""), &out, &errb, env)
	if code == 0 || !strings.Contains(errb.String(), "local.network is host, not allowlist") {
		t.Errorf("sessions network on local = %d %q %q; want an error saying local has no allowlist", code, out.String(), errb.String())
	}
}

// TestLocalEgressAudited: on local with local.network allowlist, a refused connection from
// inside the session's network namespace reaches the audit log as an egress record, through
// the CLI as a user runs it.
func TestLocalEgressAudited(t *testing.T) {
	if err := nsbox.Probe(nsbox.NetworkAllowlist); err != nil {
		testenv.Missing(t, "nsbox", err.Error())
	}
	dir, err := os.MkdirTemp("/var/tmp", "hermes-cli-egress-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	env := []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "XDG_CONFIG_HOME=" + filepath.Join(dir, "c"), "XDG_STATE_HOME=" + filepath.Join(dir, "s"),
		"HERMES_SANDBOX_TERMINAL_CWD=" + dir}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := RunWith(context.Background(), args, strings.NewReader(""), &out, &errb, env)
		return code, out.String() + errb.String()
	}
	for _, args := range [][]string{{"config", "set", "sandbox", "local"}, {"config", "set", "approvals.mode", "off"},
		{"config", "set", "local.egress_allow", "[pypi.test]"}} {
		if code, out := run(args...); code != 0 {
			t.Fatalf("%v = %d %s", args, code, out)
		}
	}
	code, out := run("exec", "-c", `exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'GET http://blocked.test/ HTTP/1.0\r\nHost: blocked.test\r\n\r\n' >&3 && head -n 1 <&3`)
	if code != 0 || !strings.Contains(out, "403") {
		t.Fatalf("exec through the relay = %d %q; want the proxy's 403", code, out)
	}
	code, out = run("audit", "show", "--kind", "egress")
	if code != 0 || !strings.Contains(out, "denied") || !strings.Contains(out, "blocked.test:80") || !strings.Contains(out, "local") {
		t.Errorf("audit show --kind egress = %d %q; want the denied connection to blocked.test", code, out)
	}
	run("sessions", "rm", "--all")
}
