//go:build !windows

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/nsbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Backend runs sessions on the host.
type Backend struct {
	opts     sandbox.FactoryOptions
	stateDir string
	shell    string
	cwd      string
	env      []string
	confine  *agent.Confinement // nil: local.confine is off
	status   string             // what doctor and sandbox_info say about confinement
	enforced bool

	mode     config.Confine
	ns       *nsbox.Spec // the namespaces every session gets; nil: none (confine off, or not Linux)
	seatbelt *seatbelt   // the Seatbelt profile every session gets on macOS; nil: none (sandboxexec.go)
	network  config.LocalNetwork
	allow    []string // local.egress_allow, else terminal.egress_allow
	allowBy  string   // the setting allow comes from
	egress   egress.Observer
	notice   sync.Once // the first session start that falls short says so once

	resolver      egress.Resolver // Section.EgressResolver
	allowLoopback bool
	brokering     egress.Brokering // Section.Brokering (secrets.go)

	branchMax int64 // local.branch_max_bytes

	nsFailed  atomic.Bool // a session start could not make the namespaces (auto ran without them)
	probeOnce sync.Once
	nsOK      bool
	nsDetail  string
}

// New builds the local backend with the default confinement (auto; only the state
// directory is known to protect). The terminal settings (shell, cwd, env_passthrough) in
// opts are all else it uses.
func New(opts sandbox.FactoryOptions) (sandbox.Backend, error) {
	return NewWith(Section{Confine: config.ConfineAuto}, opts)
}

// NewWith builds the local backend with its section.
func NewWith(sec Section, opts sandbox.FactoryOptions) (sandbox.Backend, error) {
	if opts.StateDir == "" {
		return nil, fmt.Errorf("local: no state directory: %w", sandbox.ErrInvalidConfig)
	}
	cwd := opts.Cwd
	if home, _ := opts.Getenv("HOME"); home != "" && (cwd == "~" || strings.HasPrefix(cwd, "~/")) {
		cwd = filepath.Join(home, cwd[1:])
	}
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	b := &Backend{
		opts:     opts,
		stateDir: filepath.Join(opts.StateDir, "local"),
		shell:    opts.Shell,
		cwd:      cwd,
		env:      sandbox.FilterEnv(opts.Environ, opts.EnvPassthrough),

		resolver:      sec.EgressResolver,
		allowLoopback: sec.EgressAllowLoopback,
		branchMax:     sec.BranchMaxBytes,
		brokering:     sec.Brokering,
	}
	if b.branchMax <= 0 {
		b.branchMax = config.DefaultBranchMaxBytes.Bytes()
	}
	if err := b.setConfinement(sec); err != nil {
		return nil, err
	}
	if err := b.setNamespaces(sec); err != nil {
		return nil, err
	}
	return b, nil
}

// setConfinement decides local.confine: the tool's config directory, its state directory
// and the audit log's directory become read-only to every command (and with strict, commands
// write only under the working directory and the temporary directories).
func (b *Backend) setConfinement(sec Section) error {
	mode := sec.Confine
	if mode == "" {
		mode = config.ConfineAuto
	}
	b.mode = mode
	if mode == config.ConfineOff {
		b.status = "off (local.confine: off): only the gate's path checks keep commands away from this tool's files"
		return nil
	}
	home, _ := b.opts.Getenv("HOME")
	c := &agent.Confinement{Protect: []string{b.opts.StateDir}, Strict: mode == config.ConfineStrict,
		Required: mode == config.ConfineStrict, DropCaps: true, NoUnixSockets: mode == config.ConfineStrict}
	for _, p := range sec.Protect {
		if home != "" && (p == "~" || strings.HasPrefix(p, "~/")) {
			p = filepath.Join(home, p[1:])
		}
		if filepath.IsAbs(p) {
			c.Protect = append(c.Protect, p)
		}
	}
	if c.Strict {
		c.Writable = []string{b.cwd, "/tmp", "/dev/shm"}
	}
	abi, err := agent.LandlockABI()
	switch {
	case err != nil && c.Strict:
		return fmt.Errorf("local: local.confine is strict, but %v; use local.confine auto or off on this machine: %w", err, sandbox.ErrUnavailable)
	case err != nil:
		b.status = "not kernel-enforced (" + err.Error() + "); only the gate's path checks keep commands away from this tool's files"
	case c.Strict:
		b.status, b.enforced = fmt.Sprintf("kernel-enforced (Landlock ABI %d): commands write only under %s and the temporary directories", abi, b.cwd), true
	default:
		b.status, b.enforced = fmt.Sprintf("kernel-enforced (Landlock ABI %d): this tool's config and state are read-only to commands", abi), true
	}
	b.confine = c
	return nil
}

// Confinement says whether commands are confined by the kernel, and how: the namespaces
// (probed once) and Landlock's write rules.
func (b *Backend) Confinement() (enforced bool, detail string) {
	b.probeOnce.Do(func() { b.nsOK, b.nsDetail = b.describeNamespaces() })
	return b.enforced || b.nsOK, b.nsDetail + "; write rules " + b.status
}

// Warnings says when commands are not kernel-confined, or not in namespaces.
func (b *Backend) Warnings() []string {
	var out []string
	if !b.enforced {
		out = append(out, "local: commands are "+b.status)
	}
	b.probeOnce.Do(func() { b.nsOK, b.nsDetail = b.describeNamespaces() })
	if !b.nsOK && b.mode != config.ConfineOff {
		out = append(out, "local: "+b.nsDetail)
	}
	return out
}

// WorkDir is the directory sessions start in (terminal.cwd, else the current directory):
// the tree the agent was started to work on.
func (b *Backend) WorkDir() string { return b.cwd }

// Name returns "local".
func (b *Backend) Name() string { return Name }

// Capabilities reports what local sessions do.
func (b *Backend) Capabilities() sandbox.Capabilities {
	c := sandbox.Capabilities{Jobs: true, Files: true, Terminal: true, Stdin: true, Persistent: true, Branching: true,
		Isolation: "none: commands run on this host as the current user (only the policy gate and environment filtering apply)",
		Network:   true, Host: true}
	if b.ns != nil && !b.nsFailed.Load() {
		c.Isolation = "namespaces: commands run on this host as the current user, in mount, PID and IPC namespaces of their own " +
			"(local.deny_read and this tool's files unreadable, no process of the caller visible) under Landlock write rules"
		if b.network != config.LocalNetworkHost {
			c.Isolation += ", with network " + string(b.network)
			c.Network = false
		}
	}
	if b.seatbelt != nil {
		c.Isolation = "seatbelt: commands run on this host as the current user under a Seatbelt profile (sandbox-exec): " +
			"local.deny_read unreadable, this tool's files read-only"
		if b.seatbelt.strict {
			c.Isolation += ", writes only under the working directory and the temporary directories"
		}
		if b.network != config.LocalNetworkHost {
			c.Isolation += ", with network " + string(b.network)
			c.Network = false
		}
	}
	return c
}

// Close releases nothing: local sessions hold no shared resources.
func (b *Backend) Close() error { return nil }

func (b *Backend) sessionDir(name string) string { return filepath.Join(b.stateDir, name) }

// Open returns the named session; its state lives in the state directory, so a later process
// finds the same working directory and environment.
func (b *Backend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "open", ID: name, Err: err}
	}
	pass, err := b.sessionEnv(name) // secrets.go
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "open", ID: name, Err: err}
	}
	dir := b.sessionDir(name)
	b.noteHome(name, dir)
	start := func(ctx context.Context) (channel.Started, error) {
		switch {
		case b.ns != nil && !b.nsFailed.Load():
			return b.startInNamespaces(ctx, name, dir)
		case b.seatbelt != nil:
			return b.startSeatbelt(ctx, name, dir)
		}
		return b.startInProcess(ctx, name, dir)
	}
	return channel.New(channel.Options{Backend: Name, Name: name, Start: start,
		SpillDir: filepath.Join(b.opts.StateDir, "output"), Logger: b.opts.Logger,
		Passthrough: pass}), nil
}

// startInProcess runs the session's helper in this process: commands are confined by
// Landlock alone (or not at all), and a guard kills them if this process dies.
func (b *Backend) startInProcess(ctx context.Context, name, dir string) (channel.Started, error) {
	root := b.sessionRoot(dir)
	srv, err := agent.NewServer(agent.Options{StateDir: dir, Shell: b.shell, Env: b.env, Cwd: root, Confine: b.confineFor(b.confine, root), Guard: true})
	if err != nil {
		return channel.Started{}, &sandbox.Error{Backend: Name, Op: "start", ID: name, Err: err}
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := srv.Serve(inR, outW)
		outW.CloseWithError(errors.Join(err, io.EOF))
		inR.Close()
	}()
	closeFn := func() error {
		inW.Close()
		<-done
		return nil
	}
	c, err := agent.NewClient(ctx, outR, inW, closeFn)
	if err != nil {
		return channel.Started{}, &sandbox.Error{Backend: Name, Op: "start", ID: name, Err: err}
	}
	return channel.Started{Client: c}, nil
}

// homeFile records, in a session's state, the directory the session was created in.
const homeFile = "created-in"

// noteHome binds a new session to the directory it is created in, and says so when the
// session is used from another directory: a local session keeps its own working directory
// (like a terminal tab), so `make test` from project B in a session made in project A runs in
// A. The notice goes to the progress writer (the CLI's stderr).
func (b *Backend) noteHome(name, dir string) {
	if b.opts.Cwd != "" {
		return // a configured directory: every session starts there on purpose
	}
	here := b.cwd
	home, err := os.ReadFile(filepath.Join(dir, homeFile))
	if errors.Is(err, os.ErrNotExist) {
		if os.MkdirAll(dir, 0o700) == nil {
			_ = os.WriteFile(filepath.Join(dir, homeFile), []byte(here), 0o600)
		}
		return
	}
	if err != nil || b.opts.Progress == nil || here == "" {
		return
	}
	h := string(home)
	if h == here || strings.HasPrefix(here, h+string(filepath.Separator)) {
		return
	}
	fmt.Fprintf(b.opts.Progress, "hermes-sandbox: local session %q belongs to %s (it was created there) and keeps its own directory; "+
		"this command does not run in %s. Use --cwd . to move the session here, or --session NAME for a session of this directory.\n",
		name, h, here)
}

// Sessions lists the sessions with saved state.
func (b *Backend) Sessions(ctx context.Context) ([]sandbox.SessionInfo, error) {
	entries, err := os.ReadDir(b.stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("local: list sessions: %w", err)
	}
	var out []sandbox.SessionInfo
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		info := sandbox.SessionInfo{Name: e.Name(), Backend: Name, State: "idle"}
		p := filepath.Join(b.stateDir, e.Name(), "state.json")
		if fi, err := os.Stat(p); err == nil {
			info.Used = fi.ModTime()
			var st struct {
				Cwd string `json:"cwd"`
			}
			if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &st) == nil {
				info.Cwd = st.Cwd
			}
		}
		if fi, err := e.Info(); err == nil {
			info.Created = fi.ModTime()
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove kills the session's background jobs and deletes its state.
func (b *Backend) Remove(ctx context.Context, name string) error {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: err}
	}
	// Its spill files go with it, whatever becomes of the sandbox.
	defer sandbox.RemoveSpills(filepath.Join(b.opts.StateDir, "output"), name)
	dir := b.sessionDir(name)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: fmt.Errorf("no such session: %w", sandbox.ErrNotFound)}
	}
	tree := b.ownTree(dir) // a fork's or restore's own copy goes with it
	// A session's namespaces end with every process in them; jobs started outside any (local.confine
	// off, or before namespaces) are killed by their process groups.
	if err := nsbox.Stop(b.nsSockDir(), name); err != nil {
		b.opts.Log().Warn("local: stop the session's namespaces", "session", name, "err", err)
	}
	agent.KillJobs(dir)
	b.forgetBroker(name) // secrets.go
	if err := os.RemoveAll(dir); err != nil {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: err}
	}
	if tree != "" {
		if err := os.RemoveAll(tree); err != nil {
			return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: err}
		}
	}
	return nil
}

var (
	_ sandbox.Backend        = (*Backend)(nil)
	_ sandbox.SessionManager = (*Backend)(nil)
	_ sandbox.Workspace      = (*Backend)(nil)
	_ sandbox.Brancher       = (*Backend)(nil)
)
