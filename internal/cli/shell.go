package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func (a *app) shellCmd() *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:   "shell [--session NAME]",
		Short: "Open an interactive shell in the sandbox (a real terminal)",
		Long: `Opens an interactive shell in the session's sandbox, starting in the session's working
directory with its environment. It is a gated door: every line you enter is classified by the
policy gate before it runs (hardline lines are refused, dangerous ones need your approval) and
recorded in the audit log with its verdict. Lines run without a pseudo-terminal and without
input, so full-screen programs are not available. It needs a terminal on stdin: to run a
script, use exec.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.runsCommand = true
			ctx := cmd.Context()
			in, isFile := a.stdin.(*os.File)
			if !isFile || !term.IsTerminal(int(in.Fd())) {
				return fmt.Errorf("shell needs a terminal on stdin (each line is approved by the person typing it); to run a script, use `hermes-sandbox exec -c SCRIPT`: %w", sandbox.ErrInvalidConfig)
			}
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			ctx, b, sess, done, err := a.openSession(ctx, cfg, session)
			if err != nil {
				return err
			}
			defer done()
			t, ok := sess.(sandbox.Terminal)
			if !ok {
				return fmt.Errorf("shell: the %s backend has no interactive shell: %w", b.Name(), sandbox.ErrUnsupported)
			}
			env := map[string]string{}
			if v := a.getenv("TERM"); v != "" {
				env["TERM"] = v
			}
			code, err := t.Shell(ctx, sandbox.TerminalOptions{Stdin: in, Stdout: a.stdout, Env: env})
			if err != nil {
				return err
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&session, "session", sandbox.DefaultSession, "session name")
	return cmd
}
