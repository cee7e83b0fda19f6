//go:build linux

package local_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// standInSandboxExec writes a stand-in for macOS's sandbox-exec into dir: it checks the
// `-p PROFILE` form, saves the profile as profile-SESSION beside itself (the helper's
// --state directory is named for the session) and runs the rest of its arguments. It
// enforces nothing; what it proves is how the backend starts a session's helper on macOS.
func standInSandboxExec(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "sandbox-exec")
	script := `#!/bin/sh
[ "$1" = -p ] || { echo "stand-in sandbox-exec: want -p PROFILE, got $1" >&2; exit 99; }
[ "$4" = serve ] && [ "$5" = --state ] || { echo "stand-in sandbox-exec: unexpected helper arguments: $*" >&2; exit 98; }
printf '%s' "$2" > "${0%/*}/profile-${6##*/}"
shift 2
exec "$@"
`
	must(t, os.WriteFile(p, []byte(script), 0o755))
	return p
}

// TestSeatbeltPathRunsTheHelperUnderTheProfile starts sessions the way macOS does (with a
// stand-in for sandbox-exec): the helper is this binary again, started by the stand-in with
// the session's profile, and every command is its child. The profile is the session's: its
// tree (strict), the helper's own state writable inside the protected state directory,
// deny_read unreadable, and with local.network allowlist only the session's own proxy port,
// which the commands' proxy variables name and which filters by name.
func TestSeatbeltPathRunsTheHelperUnderTheProfile(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Missing(t, "python3", err.Error())
	}
	in := egresstest.New(t)
	pp, ep := egresstest.Port(in.Pypi), egresstest.Port(in.Evil)
	root, err := os.MkdirTemp("/var/tmp", "hermes-local-seatbelt-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	root, err = filepath.EvalSymlinks(root)
	must(t, err)
	work, state, bin, secret := filepath.Join(root, "work"), filepath.Join(root, "state"), filepath.Join(root, "bin"), filepath.Join(root, "secret")
	for _, d := range []string{work, bin, secret} {
		must(t, os.MkdirAll(d, 0o755))
	}
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = work
	cfg.Local.Confine, cfg.Local.Network = config.ConfineStrict, config.LocalNetworkAllowlist
	cfg.Local.EgressAllow = []string{fmt.Sprintf("pypi.test:%d", pp)}
	cfg.Local.DenyRead = []string{secret}
	must(t, cfg.Validate())
	sec := local.SectionOf(cfg)
	sec.SandboxExec = standInSandboxExec(t, bin)
	sec.EgressResolver, sec.EgressAllowLoopback = in.Resolver, true
	newBackend := func() sandbox.Backend {
		b, err := local.NewWith(sec, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state,
			Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root}, Logger: testenv.Logger()}))
		if err != nil {
			t.Fatalf("NewWith() = %v", err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b := newBackend()
	if rep := b.(sandbox.EgressReporter).Egress(); rep.Status != sandbox.EgressEnforced || !strings.Contains(rep.Detail, "Seatbelt") {
		t.Errorf("Egress() = %+v; want enforced by Seatbelt", rep)
	}
	if c := b.Capabilities(); c.Network || !strings.HasPrefix(c.Isolation, "seatbelt:") {
		t.Errorf("Capabilities() = %+v; want seatbelt isolation without network", c)
	}
	sess := testenv.Open(t, b, "sb")
	run := func(script string) *sandbox.Result { return testenv.Run(t, sess, script) }

	// The command's parent is the helper, started with the role variable, which commands do
	// not inherit.
	res := run(`tr '\0' '\n' < /proc/$PPID/environ | grep -cx HERMES_AGENT_LOCAL_HELPER=1; env | grep -c '^HERMES_AGENT_'; echo $PPID; echo "$HTTP_PROXY"`)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 4 || lines[0] != "1" || lines[1] != "0" {
		t.Fatalf("helper check = %q %q; want the parent to carry the role and the command not", res.Stdout, res.Stderr)
	}
	helperPID, err := strconv.Atoi(lines[2])
	must(t, err)
	proxy := lines[3]
	port, err := strconv.Atoi(strings.TrimPrefix(proxy, "http://127.0.0.1:"))
	if err != nil || port <= 0 {
		t.Fatalf("HTTP_PROXY = %q; want http://127.0.0.1:PORT", proxy)
	}
	profile := readProfile(t, bin, "sb")
	for _, want := range []string{
		"(deny file-write*)\n(allow file-write*\n  (subpath \"" + work + "\")\n",
		"(deny file-write*\n  (subpath \"" + state + "\")\n",
		"(allow file-write*\n  (subpath \"" + filepath.Join(state, "local", "sb") + "\")\n",
		"(deny file-read* file-write*\n  (subpath \"" + secret + "\")\n",
		fmt.Sprintf("(deny network*)\n(allow network-outbound (remote ip \"localhost:%d\"))\n", port),
	} {
		if !strings.Contains(profile, want) {
			t.Errorf("the session's profile lacks %q:\n%s", want, profile)
		}
	}
	// The port is the session's filtering proxy: a listed name is fetched, another refused.
	if res = run(pyGet(fmt.Sprintf("http://pypi.test:%d/simple/", pp), false)); res.ExitCode != 0 || res.Stdout != "pypi-index-ok\n" {
		t.Errorf("GET http://pypi.test = exit %d %q %q; want pypi-index-ok", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res = run(pyGet(fmt.Sprintf("http://evil.test:%d/", ep), false)); res.ExitCode == 0 || !strings.Contains(res.Stderr, "403") {
		t.Errorf("GET http://evil.test = exit %d %q %q; want a 403 refusal", res.ExitCode, res.Stdout, res.Stderr)
	}
	if n := in.EvilHits.Load(); n != 0 {
		t.Errorf("evil.test was reached %d times", n)
	}
	// Closing the session ends the helper.
	if _, err := os.Stat("/proc/" + strconv.Itoa(helperPID)); err != nil {
		t.Fatalf("the helper %d is not running before close: %v", helperPID, err)
	}
	must(t, sess.Close())
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(helperPID) + "/stat")
		if errors.Is(err, os.ErrNotExist) || zombie(string(st)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the helper %d still runs 10s after the session closed", helperPID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Another process opens the session (a new backend: its own proxy, on its own port). The
	// session's saved environment holds the first proxy's address; every command gets the
	// live one, which the new profile allows.
	sess = testenv.Open(t, newBackend(), "sb")
	res = testenv.Run(t, sess, `echo "$HTTP_PROXY"`)
	allowed := fmt.Sprintf("(allow network-outbound (remote ip \"localhost:%s\"))", strings.TrimPrefix(strings.TrimSpace(res.Stdout), "http://127.0.0.1:"))
	if profile := readProfile(t, bin, "sb"); !strings.Contains(profile, allowed) {
		t.Errorf("second process: HTTP_PROXY = %q, but its profile does not hold %s:\n%s", res.Stdout, allowed, profile)
	}
	if res = testenv.Run(t, sess, pyGet(fmt.Sprintf("http://pypi.test:%d/simple/", pp), false)); res.ExitCode != 0 || res.Stdout != "pypi-index-ok\n" {
		t.Errorf("second process: GET http://pypi.test = exit %d %q %q; want pypi-index-ok", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// readProfile is the last profile the stand-in saw for session.
func readProfile(t *testing.T, bin, session string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(bin, "profile-"+session))
	if err != nil {
		t.Fatalf("the stand-in saw no profile for %s: %v", session, err)
	}
	return string(raw)
}

// zombie reports whether a /proc/PID/stat line is a process that has ended.
func zombie(stat string) bool {
	_, rest, ok := strings.Cut(stat, ") ")
	return ok && strings.HasPrefix(rest, "Z")
}

// TestSeatbeltPathWithoutSandboxExec: without sandbox-exec, strict and a network other than
// host are refused; auto with host network runs unconfined and says so.
func TestSeatbeltPathWithoutSandboxExec(t *testing.T) {
	root := t.TempDir()
	for _, tt := range []struct {
		mode    config.Confine
		network config.LocalNetwork
		refused bool
	}{
		{config.ConfineStrict, config.LocalNetworkHost, true},
		{config.ConfineAuto, config.LocalNetworkNone, true},
		{config.ConfineAuto, config.LocalNetworkHost, false},
	} {
		cfg := config.NewConfig()
		cfg.Terminal.Cwd = root
		cfg.Local.Confine, cfg.Local.Network = tt.mode, tt.network
		sec := local.SectionOf(cfg)
		sec.SandboxExec = filepath.Join(root, "no-sandbox-exec")
		b, err := local.NewWith(sec, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(root, "state"),
			Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + root}}))
		switch {
		case tt.refused && (err == nil || !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "needs Seatbelt")):
			t.Errorf("NewWith(%s, %s) without sandbox-exec = %v; want ErrUnavailable naming Seatbelt", tt.mode, tt.network, err)
		case !tt.refused && err != nil:
			t.Errorf("NewWith(%s, %s) without sandbox-exec = %v; want it to run unconfined", tt.mode, tt.network, err)
		case !tt.refused:
			if w := strings.Join(b.(interface{ Warnings() []string }).Warnings(), "\n"); !strings.Contains(w, "no-sandbox-exec") {
				t.Errorf("Warnings() = %q; want them to say sandbox-exec is missing", w)
			}
		}
	}
}

// TestConformanceSeatbeltPath runs the shared suite with every session's helper started the
// way macOS starts it (a stand-in for sandbox-exec that enforces nothing): jobs, terminals,
// files and cancellation all go through the re-executed helper.
func TestConformanceSeatbeltPath(t *testing.T) {
	t.Parallel()
	root, err := os.MkdirTemp("/var/tmp", "hermes-local-sbconf-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	state, work, bin := filepath.Join(root, "state"), filepath.Join(root, "work"), filepath.Join(root, "bin")
	must(t, os.MkdirAll(work, 0o755))
	must(t, os.MkdirAll(bin, 0o755))
	sbExec := standInSandboxExec(t, bin)
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend {
			cfg := config.NewConfig()
			cfg.Terminal.Cwd = work
			sec := local.SectionOf(cfg)
			sec.SandboxExec = sbExec
			b, err := local.NewWith(sec, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state,
				Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root, "SECRET_TOKEN=nope"}}))
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Parallel:        true,
		BranchOwnDir:    "a local fork or restored session works in its own copy of the tree, beside the state directory",
		SharedProcesses: "without namespaces (as on macOS) every session sees the host's processes",
	})
}
