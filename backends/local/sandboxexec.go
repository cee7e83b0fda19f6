//go:build !windows

package local

// Local sessions on macOS: the session's helper runs as a child process under
// `sandbox-exec -p PROFILE`, so the helper and every command it starts (foreground, job,
// terminal) are held by the session's Seatbelt profile (seatbelt.go). The child is this
// binary again: a package init serves the helper's protocol before main runs, so the CLI, a
// library user's program and a test binary all work. Linux tests drive this path with a
// stand-in for sandbox-exec that records the profile.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// SandboxExec is macOS's program that runs a command under a Seatbelt profile.
const SandboxExec = "/usr/bin/sandbox-exec"

// helperRole, set to "1" in the environment of the re-executed binary, makes it the session's
// helper. Its prefix is the one agent.Main drops from the session's environment.
const helperRole = "HERMES_AGENT_LOCAL_HELPER"

// helperExitWait bounds the wait for a helper to exit once its input is closed; then it is
// killed.
const helperExitWait = 5 * time.Second

func init() {
	if os.Getenv(helperRole) == "1" {
		os.Exit(agent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// seatbelt is how local sessions are confined on macOS.
type seatbelt struct {
	exec    string   // SandboxExec, or a test's stand-in
	protect []string // read-only to commands: this tool's config, state and audit log, the owners' sockets
	deny    []string // local.deny_read and the secrets file: unreadable
	strict  bool     // writes only under the session's tree and the temporary directories
}

// setSeatbelt confines sessions with Seatbelt profiles run by sbExec. Without sbExec,
// local.confine strict and a local.network other than host are refused; auto runs commands
// unconfined and says so.
func (b *Backend) setSeatbelt(sbExec string, deny []string) error {
	if _, err := os.Stat(sbExec); err != nil {
		if b.mode == config.ConfineStrict || b.network != config.LocalNetworkHost {
			return fmt.Errorf("local: local.confine %s with local.network %s needs Seatbelt (%v); use local.confine auto "+
				"with local.network host here, or the docker backend: %w", b.mode, b.network, err, sandbox.ErrUnavailable)
		}
		b.status, b.enforced = "not enforced (no "+sbExec+"): only the gate's path checks keep commands away from this tool's files", false
		return nil
	}
	sb := &seatbelt{exec: sbExec, deny: deny, strict: b.mode == config.ConfineStrict}
	if b.confine != nil {
		sb.protect = b.confine.Protect
	}
	b.seatbelt = sb
	b.enforced = true
	if sb.strict {
		b.status = "kernel-enforced (Seatbelt): commands write only under " + b.cwd + " and the temporary directories"
	} else {
		b.status = "kernel-enforced (Seatbelt): this tool's config and state are read-only to commands"
	}
	return nil
}

// seatbeltSpec is the profile of the session whose state is dir and whose tree is root.
// Paths are resolved, since Seatbelt matches the real path (/tmp is /private/tmp on macOS).
func (b *Backend) seatbeltSpec(dir, root string, proxyPort int) SeatbeltSpec {
	sb := b.seatbelt
	spec := SeatbeltSpec{WorkDir: realPath(root), Own: []string{realPath(dir)}, WriteAnywhere: !sb.strict,
		Network: b.network, ProxyPort: proxyPort}
	temps := []string{"/tmp", os.TempDir()}
	if t, ok := envValue(b.env, "TMPDIR"); ok && filepath.IsAbs(t) {
		temps = append(temps, t)
	}
	for _, t := range temps {
		if t = realPath(t); !slices.Contains(spec.TempDirs, t) {
			spec.TempDirs = append(spec.TempDirs, t)
		}
	}
	for _, p := range sb.protect {
		spec.Protect = append(spec.Protect, realPath(p))
	}
	for _, p := range sb.deny {
		spec.DenyRead = append(spec.DenyRead, realPath(p))
	}
	return spec
}

// realPath is p with symbolic links resolved, as far as it exists.
func realPath(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

func envValue(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// helperArgv is the command line that starts the session's helper under profile.
func helperArgv(sbExec, profile, exe, stateDir, shell, cwd string) []string {
	if shell == "" {
		shell = "auto"
	}
	return []string{sbExec, "-p", profile, exe, "serve", "--state", stateDir, "--shell", shell, "--cwd", cwd}
}

// startSeatbelt starts the session's helper under its Seatbelt profile, with the egress
// proxy it may reach for local.network allowlist.
func (b *Backend) startSeatbelt(ctx context.Context, name, dir string) (channel.Started, error) {
	fail := func(err error) (channel.Started, error) {
		return channel.Started{}, &sandbox.Error{Backend: Name, Op: "start", ID: name, Err: err}
	}
	root := b.sessionRoot(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(fmt.Errorf("find this program to run as the session's helper: %w", err))
	}
	port, stopProxy := 0, func() {}
	if b.network == config.LocalNetworkAllowlist {
		if port, stopProxy, err = b.startProxy(ctx, name); err != nil {
			return channel.Started{}, &sandbox.Error{Backend: Name, Op: "egress proxy", ID: name, Err: err}
		}
	}
	profile, err := SeatbeltProfile(b.seatbeltSpec(dir, root, port))
	if err != nil {
		stopProxy()
		return fail(err)
	}
	c, err := startHelper(ctx, helperArgv(b.seatbelt.exec, profile, exe, dir, b.shell, root), b.env, stopProxy)
	if err != nil {
		return fail(err)
	}
	if port != 0 {
		// Each process that opens the session serves a proxy of its own, on a new port: the
		// port goes with every command, over what the session's saved environment holds.
		c.SetEnv(proxyEnv(port))
	}
	return channel.Started{Client: c}, nil
}

// startProxy serves the session's filtering proxy on a loopback port of this process, the
// one address its profile lets commands connect to. It returns the port and the function
// that stops the proxy.
func (b *Backend) startProxy(ctx context.Context, session string) (int, func(), error) {
	popts, err := b.proxyOptions(session, b.opts.Log().With("session", session, "role", "egress proxy"))
	if err != nil {
		return 0, nil, err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	proxy := egress.New(popts)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = proxy.Serve(l)
	}()
	stop := func() {
		proxy.Close()
		l.Close()
		<-served
	}
	return l.Addr().(*net.TCPAddr).Port, stop, nil
}

// proxyEnv points ordinary tools at the session's proxy on loopback.
func proxyEnv(port int) map[string]string {
	env := egress.ProxyEnv()
	for k, v := range env {
		env[k] = strings.Replace(v, egress.RelayAddr, "127.0.0.1:"+strconv.Itoa(port), 1)
	}
	return env
}

// startHelper runs argv as the session's helper with env as the session's environment, and
// connects to it. The helper ends when its input closes (the client's Close, or this process
// dying), killing its foreground commands; release runs after it has exited.
func startHelper(ctx context.Context, argv, env []string, release func()) (*agent.Client, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		release()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		release()
		return nil, err
	}
	stderr := &tailBuffer{max: 4 << 10}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(slices.Clone(env), helperRole+"=1")
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	// Its own process group: a Ctrl-C at the terminal reaches the CLI, which interrupts the
	// command itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		release()
		return nil, fmt.Errorf("start the session's helper (%s): %w", argv[0], err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var once sync.Once
	closeFn := func() error {
		once.Do(func() {
			inW.Close()
			select {
			case <-exited:
			case <-time.After(helperExitWait):
				_ = cmd.Process.Kill()
				<-exited
			}
			outR.Close()
			release()
		})
		return nil
	}
	c, err := agent.NewClient(ctx, outR, inW, closeFn)
	if err != nil {
		closeFn()
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return nil, fmt.Errorf("the session's helper under %s: %w", filepath.Base(argv[0]), err)
	}
	return c, nil
}

// tailBuffer keeps the last max bytes written to it (a helper's stderr, for errors).
type tailBuffer struct {
	max int
	mu  sync.Mutex
	b   bytes.Buffer // guarded by mu
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
