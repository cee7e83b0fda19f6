// Package cli is the hermes-sandbox command line: one file per subcommand. Run never calls
// os.Exit; it returns the process exit code, so tests drive it with buffers.
package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/backends/all"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/internal/owner/daemon"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Version is set at build time with -ldflags "-X .../internal/cli.Version=…".
var Version = "0.1.0-dev"

// app is what every subcommand shares.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	environ        []string

	sandboxFlag string
	configFlag  string
	// runsCommand: exec or shell runs; a failure of our own then exits ExitRunnerFailed
	runsCommand bool
	cfg         *config.Config // the configuration loaded last, for error messages

	registry *sandbox.Registry[*config.Config]
	// ephemeral: this process removes the sessions it opens (an MCP server without
	// --keep-sessions), so backends record it as their owner for gc.
	ephemeral bool
	// sweepGone: openGuarded first removes the sandboxes of owner processes that are gone
	// (an MCP server starting).
	sweepGone bool
	// egressTap, if set, also receives the backend's egress decisions (MCP metrics).
	egressTap *egressTap
	// closers run when the command is done (the audit log).
	closers []io.Closer

	// args is the command line this run was given (a session owner is handed it again).
	args []string
	// owners: this process is the hermes-sandbox binary, which may start session owners and
	// hand them its exec (tests that drive Run with buffers never do).
	owners bool
	// In a session owner: the call being served, and the owner's warm sessions.
	req  *daemon.Request
	pool *sessionPool
	// declined is why a session owner gives a call back to its client to run itself.
	declined string
	// disposes: the ephemeral session opened for this run disposes of its sandbox when it
	// closes (sandbox.EphemeralOpener); the run removes nothing itself.
	disposes bool
}

// exitError carries a process exit code without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Run runs the command line and returns the exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return RunWith(ctx, args, stdin, stdout, stderr, os.Environ())
}

// RunWith is Run with an explicit environment (tests pass their own).
func RunWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	// stderr is shared by the backend's progress and the slow-start notice (slowNotice), which
	// writes from a timer: one lock orders their writes.
	a := &app{stdin: stdin, stdout: stdout, stderr: &syncWriter{w: stderr}, environ: environ, registry: all.Backends(), owners: ownersEnabled}
	return a.run(ctx, args)
}

// ownersEnabled is set by UseOwners.
var ownersEnabled bool

// UseOwners lets exec start a session owner and hand its call to it (terminal.keep_alive).
// Only the hermes-sandbox binary calls it: the owner is that binary started again.
func UseOwners() { ownersEnabled = true }

func (a *app) run(ctx context.Context, args []string) int {
	a.args = args
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	err := root.ExecuteContext(ctx)
	for i := len(a.closers) - 1; i >= 0; i-- {
		if cerr := a.closers[i].Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if a.declined != "" {
		return 0
	}
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintf(a.stderr, "hermes-sandbox: %v\n", err)
	var re *gate.RefusedError
	if errors.As(err, &re) {
		return re.ExitCode()
	}
	// Whatever the error names, say which settings came from elsewhere than the config file,
	// so a value from ~/.hermes/.env or the environment is never a hidden cause.
	fmt.Fprint(a.stderr, a.fromEnvironment())
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	if a.runsCommand {
		// exec and shell exit with the command's code; their own failures must not look like one.
		return sandbox.ExitRunnerFailed
	}
	return 1
}

// usageError is a mistake in the command line (exit 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "hermes-sandbox",
		Short: "Run an AI agent's shell commands in a sandbox",
		Long: "hermes-sandbox runs shell commands in the sandbox backend you choose (" + strings.Join(sandbox.BuiltinNames, ", ") +
			"),\nasks before dangerous commands, and records every command in a tamper-evident audit log.\n" +
			"It works as a CLI, a Go library and an MCP server.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&a.sandboxFlag, "sandbox", "", "backend for this run: "+strings.Join(sandbox.BuiltinNames, ", "))
	root.PersistentFlags().StringVar(&a.sandboxFlag, "terminal", "", "alias of --sandbox (Hermes's spelling)")
	root.PersistentFlags().StringVar(&a.configFlag, "config", "", "config file (default $HERMES_SANDBOX_CONFIG or ~/.config/hermes-sandbox/config.yaml)")
	var yolo bool
	root.PersistentFlags().BoolVar(&yolo, "yolo", false, "Hermes Agent's flag; answers with this tool's equivalent")
	_ = root.PersistentFlags().MarkHidden("yolo")
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error { return a.preRun(cmd, yolo) }
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	setVersionFlag(root)
	root.AddCommand(
		a.execCmd(),
		a.shellCmd(),
		a.configCmd(),
		a.sessionsCmd(),
		a.doctorCmd(),
		a.setupCmd(),
		a.benchCmd(),
		a.imageCmd(),
		a.gcCmd(),
		a.versionCmd(),
		a.mcpCmd(),
		a.policyCmd(),
		a.auditCmd(),
		a.jobsCmd(),
		agentCmd(),
		a.ownerCmd(),
		a.secretsCmd(),
	)
	root.AddCommand(a.hermesPointerCmds()...)
	a.registerCompletions(root)
	return root
}

// loadConfig loads the configuration the way every subcommand sees it.
func (a *app) loadConfig() (*config.Config, error) {
	cfg, err := config.LoadWith(config.Options{
		Path:      a.configFlag,
		Environ:   a.environ,
		IgnoreEnv: []string{"HERMES_SANDBOX_TEST_*", "HERMES_SANDBOX_MCP_TOKEN", "HERMES_SANDBOX_AGENT"},
	})
	if err == nil {
		a.cfg = cfg
	}
	return cfg, err
}

// fromEnvironment says which settings of the chosen backend the environment set, above the
// config file, for an error that may be about one of them ("" when none did).
func (a *app) fromEnvironment() string {
	if a.cfg == nil {
		return ""
	}
	var sections []string
	if name := a.selectedName(a.cfg); name != "" {
		sections = append(sections, name)
	}
	l := a.cfg.FromEnvironment(sections...)
	if len(l) == 0 {
		return ""
	}
	return "hermes-sandbox: settings in effect from the environment, above the config file: " + strings.Join(l, "; ") + "\n"
}

func (a *app) getenv(name string) string {
	for i := len(a.environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(a.environ[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}

func (a *app) factoryOptions(cfg *config.Config) sandbox.FactoryOptions {
	return cfg.BackendOptions(sandbox.FactoryOptions{Progress: a.stderr, Environ: a.environ, StateDir: cfg.StateDir(), Ephemeral: a.ephemeral})
}

// selectedName is the backend chosen by --sandbox, else by the configuration; "" for auto.
func (a *app) selectedName(cfg *config.Config) string {
	name := a.sandboxFlag
	if name == "vercel_sandbox" { // Hermes's name
		name = "vercel"
	}
	if name == "" {
		name = string(cfg.Terminal.Backend)
	}
	if name == "auto" {
		return ""
	}
	return name
}

// backendName decides which backend runs: --sandbox, else the configured one. Only "auto"
// (nothing configured) picks by itself, and then it says so, or refuses.
func (a *app) backendName(ctx context.Context, cfg *config.Config) (string, error) {
	name := a.selectedName(cfg)
	if name == "" {
		return a.autoBackend(ctx, cfg)
	}
	if !sandbox.ValidName(name) {
		return "", unknownBackend("", name)
	}
	return name, nil
}

// imageNoter is implemented by backends that may run another image than the one configured
// (docker runs the image `make run` builds when docker.image is unset and its default is
// missing): the note says which, and how to make it the setting.
type imageNoter interface {
	ImageNote(ctx context.Context) string
}

// autoBackend picks docker when its engine and an image are usable, and says so on stderr.
// Otherwise it refuses with the commands that fix it: local runs commands unisolated on this
// host, so it runs only when chosen (config, --sandbox or the environment), never picked for
// a caller, whether a person at a terminal, a script or an MCP client.
func (a *app) autoBackend(ctx context.Context, cfg *config.Config) (string, error) {
	if !a.registry.Has("docker") {
		return "", autoRefusal("docker is not built into this binary", false)
	}
	b, err := a.registry.New("docker", cfg, a.factoryOptions(cfg))
	if err != nil {
		return "", autoRefusal(err.Error(), false)
	}
	defer b.Close()
	if ch, ok := b.(sandbox.Checker); ok {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = ch.Check(cctx)
		cancel()
	}
	if err != nil {
		return "", autoRefusal(err.Error(), engineUp(err))
	}
	note := "engine and image found"
	if n, ok := b.(imageNoter); ok {
		note = cmp.Or(n.ImageNote(ctx), note)
	}
	fmt.Fprintf(a.stderr, "hermes-sandbox: no backend configured; using docker (%s). Choose one with `hermes-sandbox config set sandbox NAME`.\n", note)
	return "docker", nil
}

// autoRefusal is the error of an "auto" that found docker unusable: why, and the commands
// that fix it. imageMissing: the engine answers and only an image is missing.
func autoRefusal(reason string, imageMissing bool) error {
	fix := "make docker usable (`hermes-sandbox doctor` says what is wrong; is the engine running?)"
	if imageMissing {
		fix = "give docker an image, with no registry needed: `" + config.BuildDockerImage + "` (or `make run`), which is then used by default"
	}
	return fmt.Errorf("no backend configured (terminal.backend is auto) and docker is not usable: %s\n"+
		"Nothing ran. auto never picks the local backend, which runs commands UNISOLATED on this host. Either\n"+
		"  - %s,\n"+
		"  - or choose a backend: `hermes-sandbox setup` (or `hermes-sandbox config set sandbox NAME`),\n"+
		"  - or accept no isolation: `hermes-sandbox config set sandbox local` (or --sandbox local for one run)",
		reason, fix)
}

// openBackend builds the backend for this run.
func (a *app) openBackend(ctx context.Context, cfg *config.Config) (sandbox.Backend, error) {
	name, err := a.backendName(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if !a.registry.Has(name) {
		return nil, fmt.Errorf("backend %q is not built into this version of hermes-sandbox (available: %s); choose another with --sandbox or `hermes-sandbox config set sandbox NAME`",
			name, strings.Join(a.registry.Names(), ", "))
	}
	return a.registry.New(name, cfg, a.factoryOptions(cfg))
}
