package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

type execFlags struct {
	session    string
	timeout    time.Duration
	cwd        string
	env        []string
	json       bool
	script     string
	background bool
	ephemeral  bool
	recreate   bool
}

func (a *app) execCmd() *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec [flags] (-c SCRIPT | -- ARGV...)",
		Short: "Run a command in the sandbox and exit with its exit code",
		Long: `Run a command in the session's sandbox. With -c, SCRIPT runs in the session's shell, so
'cd' and 'export' carry over to the next exec of the same session (also across separate runs).
With -- ARGV..., the program runs with exactly these arguments, no shell involved.

Output streams while the command runs. With --json, one JSON object is printed at the end:
exit_code, stdout, stderr, truncated, output_file, duration_ms, cwd, environment_recreated.`,
		Example: `  hermes-sandbox exec -c 'cd /tmp && export X=1'
  hermes-sandbox exec -c 'pwd; echo $X'          # prints /tmp and 1
  hermes-sandbox exec --timeout 10s -- python3 -c 'print(42)'
  hermes-sandbox exec --json -c 'ls /'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.runsCommand = true
			return a.runExec(cmd.Context(), cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.session, "session", sandbox.DefaultSession, "session name: sessions keep their working directory and environment")
	fl.DurationVar(&f.timeout, "timeout", 0, "kill the command's process tree after this long (default terminal.timeout; with --background, the job's lifetime, default terminal.job_timeout)")
	fl.StringVar(&f.cwd, "cwd", "", "directory to run in (becomes the session's directory for -c scripts)")
	fl.StringArrayVar(&f.env, "env", nil, "set a variable for this command only, K=V (repeatable)")
	fl.BoolVar(&f.json, "json", false, "print one JSON object with the result instead of streaming")
	fl.StringVarP(&f.script, "command", "c", "", "script to run in the session's shell")
	fl.BoolVar(&f.ephemeral, "ephemeral", false, "run in a fresh sandbox that is removed when the command ends (terminal.persistence: ephemeral makes it the default)")
	fl.BoolVar(&f.recreate, "recreate", false, "first give the session a new sandbox made from the current settings (a live session keeps its own until then; its jobs and shell state go, its workspace stays)")
	fl.BoolVar(&f.background, "background", false, "start as a background job and print its id (poll it with 'hermes-sandbox jobs')")
	return cmd
}

// execJSON is the --json result; field names are part of the CLI's contract.
type execJSON struct {
	ExitCode             int     `json:"exit_code"`
	Stdout               string  `json:"stdout"`
	Stderr               string  `json:"stderr"`
	Truncated            bool    `json:"truncated"`
	OutputFile           string  `json:"output_file"`
	DurationMS           float64 `json:"duration_ms"`
	Cwd                  string  `json:"cwd"`
	EnvironmentRecreated bool    `json:"environment_recreated"`
	// StateSaved is false when the command's cd and export could not be saved.
	StateSaved bool `json:"state_saved"`
}

func (a *app) buildCommand(cmd *cobra.Command, f execFlags, args []string) (sandbox.Command, error) {
	var c sandbox.Command
	scriptSet := cmd.Flags().Changed("command")
	switch {
	case scriptSet && len(args) > 0:
		return c, usagef("exec: give either -c SCRIPT or -- ARGV..., not both")
	case scriptSet:
		if strings.TrimSpace(f.script) == "" {
			return c, usagef("exec: -c needs a non-empty script")
		}
		c.Script = f.script
	case len(args) > 0:
		if args[0] == "" {
			return c, usagef("exec: empty program name")
		}
		c.Argv = args
	default:
		return c, usagef("exec: nothing to run: give -c SCRIPT or -- ARGV...")
	}
	if cmd.Flags().Changed("timeout") && f.timeout <= 0 {
		return c, usagef("exec: --timeout %s: want a positive duration such as 30s or 10m (leave it out to use terminal.timeout)", f.timeout)
	}
	c.Dir = f.cwd
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return c, usagef("exec: --env %q: want K=V", kv)
		}
		if c.Env == nil {
			c.Env = map[string]string{}
		}
		c.Env[k] = v
	}
	return c, nil
}

// recreateSession gives a session a sandbox made from the current settings (exec --recreate).
func (a *app) recreateSession(ctx context.Context, cfg *config.Config, name string) error {
	b, err := a.openGuarded(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	r, ok := b.(sandbox.Recreator)
	if !ok {
		return fmt.Errorf("exec --recreate: the %s backend cannot recreate a session: %w", b.Name(), sandbox.ErrUnsupported)
	}
	if err := r.Recreate(ctx, name); err != nil {
		return err
	}
	a.forgetInOwners(b.Name(), name)
	return nil
}

func (a *app) runExec(ctx context.Context, cmd *cobra.Command, f execFlags, args []string) error {
	c, err := a.buildCommand(cmd, f, args)
	if err != nil {
		return err
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	c.Timeout = f.timeout
	if !cmd.Flags().Changed("timeout") {
		c.Timeout = cfg.Terminal.Timeout
	}
	c.OutputLimit = cfg.Terminal.OutputLimit
	c.SpillLimit = cfg.Terminal.SpillLimit.Bytes()
	c.MaxJobs = cfg.Terminal.MaxJobs
	c.JobTimeout = cfg.Terminal.JobTimeout
	if f.background && cmd.Flags().Changed("timeout") {
		// --timeout with --background bounds the job's lifetime.
		c.JobTimeout = f.timeout
	}
	ephemeral := f.ephemeral || cfg.Terminal.Persistence == config.PersistenceEphemeral
	if ephemeral {
		switch {
		case f.background:
			return usagef("exec: a background job needs a session that stays; drop --ephemeral (or set terminal.persistence: session)")
		case cmd.Flags().Changed("session"):
			return usagef("exec: --session names a session that stays; an ephemeral run has a fresh sandbox of its own")
		}
		f.session = "ephemeral-" + sandbox.RandomHex(4)
	}
	if f.recreate && ephemeral {
		return usagef("exec: --recreate is for a session that stays; an ephemeral run has a fresh sandbox anyway")
	}
	if f.recreate {
		// Recreated here, in this process, with this call's settings; the owners drop their
		// warm helper of the old sandbox.
		if err := a.recreateSession(ctx, cfg, f.session); err != nil {
			return err
		}
	}
	if code, handled := a.useOwner(cfg); handled {
		if code != 0 {
			return exitError{code}
		}
		return nil
	}
	open := a.openSession
	switch {
	case a.pool != nil:
		open = func(ctx context.Context, cfg *config.Config, name string) (context.Context, sandbox.Backend, sandbox.Session, func(), error) {
			return a.openPooledSession(ctx, cfg, name, ephemeral)
		}
	case ephemeral:
		// A process of its own runs one command: a warm pool of docker.pool_size containers
		// would be made for it and thrown away with the process (the owner keeps one).
		cfg.Docker.PoolSize = 0
	}
	ctx, b, sess, done, err := open(ctx, cfg, f.session)
	if err != nil {
		return err
	}
	if ephemeral && !a.disposes {
		// The sandbox goes when the command ends, whatever happened (also on Ctrl-C or when
		// the owner's client goes).
		m, ok := b.(sandbox.SessionManager)
		if !ok {
			done()
			return fmt.Errorf("exec --ephemeral: the %s backend cannot remove sandboxes: %w", b.Name(), sandbox.ErrUnsupported)
		}
		name := f.session
		closeAll := done
		remove := func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			err := m.Remove(rctx, name)
			switch {
			case err == nil || errors.Is(err, sandbox.ErrNotFound):
			case a.pool != nil: // the client has gone by now
				a.pool.logger.Warn("owner: could not remove an ephemeral sandbox (`hermes-sandbox gc` removes it)", "session", name, "err", err)
			default:
				fmt.Fprintf(a.stderr, "hermes-sandbox: could not remove the ephemeral sandbox %s: %v (`hermes-sandbox gc` removes it)\n", name, err)
			}
		}
		done = func() {
			sess.Close()
			if a.pool != nil {
				// In an owner, the client has its result before the sandbox is gone: the
				// owner removes it in the background (its exit waits for that).
				a.pool.later(func() { remove(); closeAll() })
				return
			}
			remove()
			closeAll()
		}
	}
	defer done()

	if f.background {
		jr, ok := sess.(sandbox.JobRunner)
		if !ok {
			return fmt.Errorf("exec --background: the %s backend has no background jobs: %w", b.Name(), sandbox.ErrUnsupported)
		}
		st, err := jr.StartJob(ctx, c)
		if err != nil {
			return err
		}
		if f.json {
			return json.NewEncoder(a.stdout).Encode(st)
		}
		fmt.Fprintln(a.stdout, st.ID)
		return nil
	}

	if !f.json {
		c.Stdout, c.Stderr = a.stdout, a.stderr
	}
	if a.stdin != nil && b.Capabilities().Stdin && !a.stdinIsTerminal() {
		c.Stdin = a.stdin
	}
	res, err := sess.Exec(ctx, c)
	var refused *gate.RefusedError
	if f.json && errors.As(err, &refused) {
		// Tools reading --json get a result for a refusal too: exit 126 and the reason.
		res = &sandbox.Result{ExitCode: refused.ExitCode(), Stderr: refused.Error() + "\n"}
		err = nil
	}
	if res == nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(execJSON{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr,
			Truncated: res.Truncated, OutputFile: res.OutputFile, DurationMS: float64(res.Duration.Microseconds()) / 1000,
			Cwd: res.Cwd, EnvironmentRecreated: res.EnvironmentRecreated, StateSaved: !res.StateNotSaved}); err != nil {
			return err
		}
	}
	if res.StateNotSaved {
		fmt.Fprintf(a.stderr, "hermes-sandbox: warning: this command's cd and export were not saved: %s; the next command runs with the state from before it\n", res.StateError)
	}
	if !f.json {
		switch {
		case res.TimedOut:
			fmt.Fprintf(a.stderr, "hermes-sandbox: timed out after %s; the command's process tree was killed (raise it with --timeout)\n", c.Timeout)
		case res.Interrupted:
			fmt.Fprintln(a.stderr, "hermes-sandbox: interrupted; the command's process tree was killed")
		}
		if res.EnvironmentRecreated {
			fmt.Fprintln(a.stderr, "hermes-sandbox: note: the sandbox was lost and recreated before this command; earlier files and shell state are gone")
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if res.ExitCode != 0 {
		return exitError{res.ExitCode}
	}
	return nil
}

// randomID is 8 random hex characters.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
