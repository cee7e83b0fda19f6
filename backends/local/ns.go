//go:build !windows

package local

// Namespaces for local sessions (package nsbox): what they hide, their network, and the
// egress allowlist's relay and proxy for local.network allowlist.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/mux"
	"github.com/hermes-sandbox/hermes-sandbox/internal/nsbox"
	"github.com/hermes-sandbox/hermes-sandbox/internal/nsbox/nsinit"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// relayGreeting bounds the wait for a new relay to listen (another process's relay of the
// same session may hold the port; the new one takes over when it frees).
const relayGreeting = 5 * time.Second

// nsSockDir holds the sockets, locks and logs of the sessions' namespaces.
func (b *Backend) nsSockDir() string { return filepath.Join(b.opts.StateDir, "local-ns") }

// setNamespaces decides the namespaces sessions get: none with local.confine off (where
// local.network must be host) or off Linux (where strict is refused); otherwise mount, PID and
// IPC namespaces hiding local.deny_read and this tool's files, and a network namespace unless
// the network is the host's.
func (b *Backend) setNamespaces(sec Section) error {
	b.network = config.LocalConfig{Confine: b.mode, Network: sec.Network, EgressAllow: sec.EgressAllow}.EffectiveNetwork(b.opts.EgressAllow)
	b.allow, b.allowBy = sec.EgressAllow, "local.egress_allow"
	if len(b.allow) == 0 {
		b.allow, b.allowBy = b.opts.EgressAllow, "terminal.egress_allow"
	}
	if b.mode == config.ConfineOff {
		if b.network != config.LocalNetworkHost {
			return fmt.Errorf("local: local.network is %s but local.confine is off; only a confined command gets a network namespace: %w", b.network, sandbox.ErrInvalidConfig)
		}
		return nil
	}
	if sec.NoNamespaces {
		return nil
	}
	deny := b.denyPaths(sec)
	if runtime.GOOS == "darwin" || sec.SandboxExec != "" {
		sbExec := sec.SandboxExec
		if sbExec == "" {
			sbExec = SandboxExec
		}
		return b.setSeatbelt(sbExec, deny)
	}
	if runtime.GOOS != "linux" {
		if b.mode == config.ConfineStrict || b.network != config.LocalNetworkHost {
			return fmt.Errorf("local: local.confine strict and local.network %s need Linux namespaces, and this is %s: "+
				"use local.confine auto with local.network host here, or the docker backend: %w", b.network, runtime.GOOS, sandbox.ErrUnavailable)
		}
		return nil
	}
	hide := []string{b.opts.StateDir}
	var conf *agent.Confinement
	if b.confine != nil {
		c := *b.confine
		c.DropCaps = true
		c.Required = false // Landlock is one layer of several here; its status says
		conf = &c
		hide = append(hide, c.Protect...)
	} else {
		hide = append(hide, sec.Protect...)
	}
	b.ns = &nsbox.Spec{Layout: nsinit.Layout{SockDir: b.nsSockDir(), Hide: hide, DenyRead: deny, Network: nsbox.Network(b.network),
		Keep: []string{b.cwd}}, Confine: conf}
	if b.network == config.LocalNetworkAllowlist {
		for k, v := range egress.ProxyEnv() {
			b.env = append(b.env, k+"="+v)
		}
	}
	return nil
}

// denyPaths are local.deny_read (or its defaults), the secrets file and the host's escape
// sockets, with "~" expanded; relative paths are dropped.
func (b *Backend) denyPaths(sec Section) []string {
	home, _ := b.opts.Getenv("HOME")
	expand := func(p string) string {
		if home != "" && (p == "~" || strings.HasPrefix(p, "~/")) {
			return filepath.Join(home, p[1:])
		}
		return p
	}
	denyList := sec.DenyRead
	if denyList == nil {
		denyList = config.DefaultDenyRead()
	}
	var deny []string
	for _, p := range slices.Concat(denyList, []string{sec.Secrets}, escapeSockets(b.opts)) {
		if p = expand(p); filepath.IsAbs(p) {
			deny = append(deny, p)
		}
	}
	return deny
}

// escapeSockets are the host's sockets through which a command could run something outside
// its namespaces (a container engine, the user's D-Bus session bus and systemd, a terminal
// multiplexer, an X server, an ssh-agent): they are masked like deny_read paths. Patterns
// are expanded when a session's namespaces start.
func escapeSockets(opts sandbox.FactoryOptions) []string {
	uid := strconv.Itoa(os.Getuid())
	run, _ := opts.Getenv("XDG_RUNTIME_DIR")
	if run == "" {
		run = "/run/user/" + uid
	}
	out := []string{run, "/run/user/" + uid, "/run/docker.sock", "/var/run/docker.sock", "/run/containerd",
		"/run/podman", "/run/dbus/system_bus_socket", "/run/screen", "/var/run/screen", "/tmp/.X11-unix",
		"/tmp/tmux-" + uid}
	ssh, _ := filepath.Glob("/tmp/ssh-*")
	return append(out, ssh...)
}

// startInNamespaces connects to the session's helper inside its namespaces, starting them
// when none run. Under local.confine auto a machine that cannot make them gets the helper in
// this process, and a notice; under strict, an error.
func (b *Backend) startInNamespaces(ctx context.Context, name, dir string) (channel.Started, error) {
	spec := *b.ns
	spec.Session, spec.StateDir = name, dir
	root := b.sessionRoot(dir)
	if root != b.cwd {
		// A fork's own tree stays visible and, under strict, writable.
		spec.Layout.Keep = append(slices.Clone(spec.Layout.Keep), root)
		spec.Confine = b.confineFor(spec.Confine, root)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return channel.Started{}, &sandbox.Error{Backend: Name, Op: "start", ID: name, Err: err}
	}
	conn, rep, err := nsbox.Serve(ctx, spec, nsbox.Helper{Shell: b.shell, Env: b.env, Cwd: root})
	if err != nil {
		if b.mode == config.ConfineStrict || b.network != config.LocalNetworkHost {
			return channel.Started{}, &sandbox.Error{Backend: Name, Op: "start", ID: name, Err: fmt.Errorf(
				"local.confine is %s with local.network %s, and %v; refusing to run unprotected (local.confine auto with local.network host runs with Landlock alone): %w",
				b.mode, b.network, err, sandbox.ErrUnavailable)}
		}
		b.nsFailed.Store(true)
		b.say(fmt.Sprintf("hermes-sandbox: local commands run WITHOUT namespaces: %v. Enforced: %s. Not enforced: "+
			"local.deny_read, hiding this tool's files and processes. (local.confine strict refuses to "+
			"run like this.)", err, b.status))
		return b.startInProcess(ctx, name, dir)
	}
	if len(rep.Missing) > 0 {
		b.say("hermes-sandbox: local namespaces: enforced: " + strings.Join(rep.Enforced, "; ") + ". NOT enforced: " + strings.Join(rep.Missing, "; ") + ".")
	}
	var stopRelay func()
	if b.network == config.LocalNetworkAllowlist {
		if stopRelay, err = b.startRelay(ctx, spec); err != nil {
			conn.Close()
			return channel.Started{}, &sandbox.Error{Backend: Name, Op: "egress relay", ID: name, Err: err}
		}
	}
	closeFn := func() error {
		err := conn.Close()
		if stopRelay != nil {
			stopRelay()
		}
		return err
	}
	c, err := agent.NewClient(ctx, conn, conn, closeFn)
	if err != nil {
		closeFn()
		return channel.Started{}, &sandbox.Error{Backend: Name, Op: "start", ID: name, Err: err}
	}
	return channel.Started{Client: c}, nil
}

// say writes a notice to the progress writer (the CLI's stderr), once per backend.
func (b *Backend) say(msg string) {
	b.notice.Do(func() {
		b.opts.Log().Warn(msg)
		if b.opts.Progress != nil {
			fmt.Fprintln(b.opts.Progress, msg)
		}
	})
}

// startRelay starts a relay inside the session's network namespace and serves its
// connections with a filtering proxy in this process, as a docker session's relay exec is
// served. It returns the function that stops both.
func (b *Backend) startRelay(ctx context.Context, spec nsbox.Spec) (func(), error) {
	rc, err := nsbox.Relay(ctx, spec)
	if err != nil {
		return nil, err
	}
	log := b.opts.Log().With("session", spec.Session, "role", "egress relay")
	ms := mux.New(rc, rc, rc)
	popts, err := b.proxyOptions(spec.Session, log)
	if err != nil {
		ms.Close()
		return nil, err
	}
	proxy := egress.New(popts)
	var wg sync.WaitGroup
	var served atomic.Int64
	stop := func() {
		ms.Close()
		proxy.Close()
		wg.Wait()
	}
	if err := egress.RunRelay(ctx, ms, proxy, &served, &wg, relayGreeting, log); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// proxyOptions configure the filtering proxy of a session with local.network allowlist.
func (b *Backend) proxyOptions(session string, log *slog.Logger) (egress.Options, error) {
	popts := egress.Options{Session: session, Allow: b.overrides().AllowFunc(session), ConfigKey: b.allowBy,
		Resolver: b.resolver, AllowLoopback: b.allowLoopback, Record: b.egress.Recorder(Name), Logger: log}
	err := b.brokering.ApplySession(&popts, b.brokerDir()) // secrets.go
	return popts, err
}

// overrides is the configured allowlist with each live session's change to it (`sessions
// network`).
func (b *Backend) overrides() egress.Overrides {
	return egress.Overrides{Dir: filepath.Join(b.opts.StateDir, "local-egress"), Base: b.allow, ConfigKey: b.allowBy, Logger: b.opts.Log(),
		Live: b.brokering.Live}
}

// ObserveEgress installs the function that receives every connection the proxy decides on
// (the CLI writes them to the audit log). Call it before opening sessions.
func (b *Backend) ObserveEgress(fn func(sandbox.EgressEvent)) { b.egress.Set(fn) }

// Egress reports what local enforces about outbound connections.
func (b *Backend) Egress() sandbox.EgressReport {
	switch {
	case b.ns != nil && b.network == config.LocalNetworkAllowlist:
		detail := "enforced: commands run in a network namespace with loopback only; only this tool's filtering proxy, reached through the session's relay on " +
			egress.RelayAddr + ", connects out, to the hosts in " + b.allowBy
		if len(b.allow) == 0 {
			detail += " (empty: nothing is reachable until a person allows a host)"
		}
		return sandbox.EgressReport{Status: sandbox.EgressEnforced, Allow: slices.Clone(b.allow), Detail: detail, AppliesShared: true}
	case b.ns != nil && b.network == config.LocalNetworkNone:
		return sandbox.EgressReport{Status: sandbox.EgressNone, AppliesShared: false,
			Detail: "none: commands run in a network namespace with loopback only (local.network none); set local.network allowlist to reach listed hosts"}
	}
	if b.seatbelt != nil {
		switch b.network {
		case config.LocalNetworkAllowlist:
			detail := "enforced: each session's Seatbelt profile lets commands connect only to the session's filtering proxy on 127.0.0.1, " +
				"which connects out to the hosts in " + b.allowBy
			if len(b.allow) == 0 {
				detail += " (empty: nothing is reachable until a person allows a host)"
			}
			return sandbox.EgressReport{Status: sandbox.EgressEnforced, Allow: slices.Clone(b.allow), Detail: detail, AppliesShared: true}
		case config.LocalNetworkNone:
			return sandbox.EgressReport{Status: sandbox.EgressNone, AppliesShared: false,
				Detail: "none: each session's Seatbelt profile denies commands every network connection (local.network none); set local.network allowlist to reach listed hosts"}
		}
	}
	return sandbox.EgressReport{Status: sandbox.EgressNotAvailable,
		Detail: "not available: local.network is host, so commands reach whatever this host reaches (set local.network allowlist, or none)"}
}

// SetSessionEgress changes a session's allowlist while it runs: allow adds hosts, deny
// removes them. The change applies to the session's next connection. It returns the
// allowlist now in force.
func (b *Backend) SetSessionEgress(ctx context.Context, session string, allow, deny []string) ([]string, error) {
	if err := sandbox.ValidateSessionName(session); err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "network", ID: session, Err: err}
	}
	if (b.ns == nil && b.seatbelt == nil) || b.network != config.LocalNetworkAllowlist {
		return nil, &sandbox.Error{Backend: Name, Op: "network", ID: session, Err: fmt.Errorf(
			"local.network is %s, not allowlist: there is no allowlist to change (hermes-sandbox config set local.network allowlist): %w", b.network, sandbox.ErrUnsupported)}
	}
	if _, err := egress.ParseRules(slices.Concat(allow, deny)); err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "network", ID: session, Err: fmt.Errorf("%v: %w", err, sandbox.ErrInvalidConfig)}
	}
	if _, err := os.Stat(b.sessionDir(session)); err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "network", ID: session, Err: fmt.Errorf("no such session: %w", sandbox.ErrNotFound)}
	}
	return b.overrides().Change(session, allow, deny)
}

// describeNamespaces is the namespaces' part of the confinement status, probing the kernel.
func (b *Backend) describeNamespaces() (ok bool, detail string) {
	if b.seatbelt != nil {
		return true, fmt.Sprintf("Seatbelt (sandbox-exec): %d deny_read paths unreadable, this tool's files read-only, network %s; "+
			"the caller's processes stay visible (no namespaces on %s)", len(b.seatbelt.deny), b.network, runtime.GOOS)
	}
	if b.ns == nil {
		if b.mode == config.ConfineOff {
			return false, "no namespaces (local.confine off): local.deny_read is not enforced, commands see the caller's processes and the host's network"
		}
		return false, "no namespaces (" + runtime.GOOS + "): local.deny_read is not enforced, commands see the caller's processes and the host's network"
	}
	if err := nsbox.Probe(b.ns.Network); err != nil {
		what := "commands run with Landlock alone"
		if b.mode == config.ConfineStrict || b.network != config.LocalNetworkHost {
			what = "commands are refused (local.confine " + string(b.mode) + ", local.network " + string(b.network) + ")"
		}
		return false, "namespaces unavailable (" + err.Error() + "): " + what + "; local.deny_read is not enforced"
	}
	return true, fmt.Sprintf("namespaces: %d deny_read paths unreadable, this tool's files and the caller's processes invisible, a minimal /dev, network %s",
		len(b.ns.DenyRead), b.network)
}
