//go:build !windows

// Package singularity runs each session in its own Apptainer (or SingularityCE) instance,
// through the runtime's command line: there is no Go API. The isolation flags take effect
// only at `instance start`, so every one is given there: --containall (file systems, PID,
// IPC and environment contained), --no-home, --no-privs, --net --network none (loopback
// only), a pids limit where the host's cgroups allow it, and either --writable-tmpfs
// (singularity.readonly: true, the default: the image stays untouched and writes outside
// /workspace vanish with the instance) or a persistent --overlay directory under the state
// directory (singularity.readonly: false: changes to the root file system survive a restart
// of the instance). /workspace is bound from the state directory, so its files survive too.
//
// The static sandbox-agent helper is bound read-only at /.hermes/sandbox-agent and serves
// the session over the stdin and stdout of one long-lived `exec --cleanenv` child process,
// so a command costs one round trip instead of an `apptainer exec`. The environment is
// rebuilt on every exec: only terminal.env_passthrough names reach the sandbox, from a 0600
// file given with --env-file, never on a command line.
//
// Instances are named hermes-<scope>-<session>, where scope is a hash of the state
// directory, so a later process finds its sessions with `instance list --json` and two state
// directories never share one. docker:// (and other remote) images are converted once with
// `build` into a cache under the state directory; a .sif path is used as it is.
package singularity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Name is the backend's registry name.
const Name = "singularity"

// Backend runs sessions in Apptainer instances on this host.
type Backend struct {
	opts  sandbox.FactoryOptions
	cfg   config.SingularityConfig
	log   *slog.Logger
	shell string

	dir      string // <state>/singularity: sessions, image cache, env files
	spillDir string
	names    sandbox.Scope // instance names: separates state directories on one host
	passEnv  []string
	// records mark that a session's instance was started (the instance name): a record
	// without a running instance means the instance vanished. Its mtime is the last use.
	records sandbox.Records[sandbox.IDRecord]

	exeMu sync.Mutex
	exe   string // guarded by exeMu; resolved and probed once

	buildMu sync.Mutex // one image conversion at a time in this process

	noLimits atomic.Bool // the host refused --pids-limit once; stop asking

	mu     sync.Mutex
	closed bool // guarded by mu
}

// New builds the singularity backend from its config section. It runs nothing: the runtime
// is looked for and probed on first use.
func New(cfg config.SingularityConfig, opts sandbox.FactoryOptions) (sandbox.Backend, error) {
	return sandbox.AsBackend(newBackend(cfg, opts))
}

func newBackend(cfg config.SingularityConfig, opts sandbox.FactoryOptions) (*Backend, error) {
	names, err := sandbox.NewScope(opts.StateDir)
	if err != nil {
		return nil, wrap("new", "", err)
	}
	state := names.Dir()
	b := &Backend{
		opts:     opts,
		cfg:      cfg,
		log:      opts.Log().With("backend", Name),
		shell:    opts.Shell,
		dir:      filepath.Join(state, Name),
		spillDir: filepath.Join(state, "output"),
		names:    names,
		passEnv:  opts.Passthrough(),
	}
	b.records = sandbox.Records[sandbox.IDRecord]{Dir: filepath.Join(b.dir, "sessions"), Ext: "/instance", Legacy: sandbox.BareID, Logger: b.log}
	return b, nil
}

// Name returns "singularity".
func (b *Backend) Name() string { return Name }

// Capabilities reports what singularity sessions do.
func (b *Backend) Capabilities() sandbox.Capabilities {
	iso := "Apptainer instance: user namespace, contained file systems, PID and IPC, no capabilities, clean environment, loopback-only network, "
	if b.cfg.Readonly {
		iso += "read-only image with a throwaway writable layer"
	} else {
		iso += "image with a persistent overlay"
	}
	return sandbox.Capabilities{Jobs: true, Files: true, Terminal: true, Stdin: true, Persistent: true, Isolation: iso, Network: false}
}

// Warnings lists configuration choices that weaken the isolation.
func (b *Backend) Warnings() []string {
	var w []string
	for _, bind := range b.cfg.Binds {
		if !strings.HasSuffix(bind, ":ro") {
			src, _, _ := strings.Cut(bind, ":")
			w = append(w, fmt.Sprintf("singularity.binds mounts %s read-write: commands can change it on the host; add :ro unless they must", src))
		}
	}
	if b.noLimits.Load() {
		w = append(w, "this host cannot apply a pids limit to unprivileged instances (it needs cgroups v2 with systemd delegation), so a fork bomb is stopped only by the account's process limit")
	}
	return w
}

// Close marks the backend closed. Sessions' instances stay for the next process.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// instanceName is the session's instance: found again from any process using the same state
// directory.
func (b *Backend) instanceName(session string) string { return b.names.Name(session) }

// sessionOf returns the session of one of our instance names ("" for others).
func (b *Backend) sessionOf(instance string) string { return b.names.Session(instance) }

// WorkDir is the session's persistent workspace (singularity.cwd, else /workspace), bound
// from the state directory: what commands delete there is the agent's own.
func (b *Backend) WorkDir() string { return workdir(b.cfg) }

// sessionDir holds a session's host-side state: its record, workspace, overlay and env file.
func (b *Backend) sessionDir(session string) string {
	return filepath.Join(b.dir, "sessions", session)
}

// Open returns the named session. Nothing starts until its first command: then the session's
// instance is found again, or started, and a helper is attached to it.
func (b *Backend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	if err := sandbox.CheckOpen(Name, name, b.isClosed(), func() error { return validate(b.cfg) }); err != nil {
		return nil, err
	}
	s := &session{b: b, name: name}
	s.Session = channel.New(channel.Options{Backend: Name, Name: name, Start: s.start,
		SpillDir: b.spillDir, Logger: b.opts.Logger, OnClose: func() error { b.records.Touch(name); return nil },
		Passthrough: b.opts.PassthroughMap()})
	return s, nil
}

// executable finds the runtime (singularity.executable, else apptainer, else singularity on
// PATH) and probes it with `version`, once; a failure is tried again next time.
func (b *Backend) executable(ctx context.Context) (string, error) {
	b.exeMu.Lock()
	defer b.exeMu.Unlock()
	if b.exe != "" {
		return b.exe, nil
	}
	candidates := []string{"apptainer", "singularity"}
	if b.cfg.Executable != "" {
		candidates = []string{b.cfg.Executable}
	}
	var exe string
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		return "", &missingError{tried: candidates}
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := b.runWith(pctx, exe, versionArgs()...); err != nil {
		return "", fmt.Errorf("probe: %w", err)
	}
	b.exe = exe
	return exe, nil
}

// run runs the runtime with args and returns its stdout.
func (b *Backend) run(ctx context.Context, args ...string) ([]byte, error) {
	exe, err := b.executable(ctx)
	if err != nil {
		return nil, err
	}
	return b.runWith(ctx, exe, args...)
}

func (b *Backend) runWith(ctx context.Context, exe string, args ...string) ([]byte, error) {
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = b.dir
	cmd.Env = runtimeEnv()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// `instance start` leaves a daemon behind; should it keep our pipes open, do not wait
	// for it beyond this.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		err = nil
	}
	if err != nil {
		return stdout.Bytes(), runtimeErr(filepath.Base(exe), subcommand(args), err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// helper finds the static helper binary for this host's architecture and the arguments that
// come before `serve`.
func helper() (string, []string, error) {
	bin, err := agentbin.Locate(agentbin.HostArch())
	if err != nil {
		return "", nil, sandbox.WithKind(sandbox.ErrUnavailable, err)
	}
	return bin.Path, bin.Args, nil
}

// Check tells quickly whether singularity sessions can run here: the runtime exists and
// answers `version`, the helper binary exists, and the image is configured (and present, when
// it is a local file). A remote image not converted yet is fine: the first session does it.
func (b *Backend) Check(ctx context.Context) error {
	if _, err := b.executable(ctx); err != nil {
		return wrap("check", "", err)
	}
	if _, _, err := helper(); err != nil {
		return wrap("check", "", err)
	}
	if err := validate(b.cfg); err != nil {
		return wrap("check", "", err)
	}
	if !remoteImage(b.cfg.Image) {
		if _, err := b.localImage(); err != nil {
			return wrap("check", b.cfg.Image, err)
		}
	}
	return nil
}

var (
	_ sandbox.Backend        = (*Backend)(nil)
	_ sandbox.SessionManager = (*Backend)(nil)
	_ sandbox.Checker        = (*Backend)(nil)
	_ sandbox.Warner         = (*Backend)(nil)
	_ sandbox.Workspace      = (*Backend)(nil)
	_ sandbox.ImageManager   = (*Backend)(nil)
	_ sandbox.Collector      = (*Backend)(nil)
)
