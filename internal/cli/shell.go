package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func (a *app) shellCmd() *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:   "shell [--session NAME]",
		Short: "Open an interactive shell in the sandbox (a real terminal)",
		Long: `Opens an interactive shell on a pseudo-terminal inside the session's sandbox, starting in
the session's working directory with its environment. Without a terminal on stdin, the input
is run as one script in the session instead.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			ctx, b, sess, done, err := a.openSession(ctx, cfg, session)
			if err != nil {
				return err
			}
			defer done()
			in, isFile := a.stdin.(*os.File)
			if !isFile || !term.IsTerminal(int(in.Fd())) {
				script, err := io.ReadAll(a.stdin)
				if err != nil {
					return err
				}
				res, err := sess.Exec(ctx, sandbox.Command{Script: string(script), Stdout: a.stdout, Stderr: a.stderr, Timeout: cfg.Terminal.Timeout})
				if res == nil {
					return err
				}
				if res.ExitCode != 0 {
					return exitError{res.ExitCode}
				}
				return nil
			}
			t, ok := sess.(sandbox.Terminal)
			if !ok {
				return fmt.Errorf("shell: the %s backend has no interactive terminal: %w", b.Name(), sandbox.ErrUnsupported)
			}
			fd := int(in.Fd())
			cols, rows, _ := term.GetSize(fd)
			old, err := term.MakeRaw(fd)
			if err != nil {
				return fmt.Errorf("shell: put the terminal in raw mode: %w", err)
			}
			defer term.Restore(fd, old)
			winch := make(chan os.Signal, 1)
			signal.Notify(winch, syscall.SIGWINCH)
			defer signal.Stop(winch)
			resize := make(chan sandbox.WinSize)
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case <-winch:
						if c, r, err := term.GetSize(fd); err == nil {
							select {
							case resize <- sandbox.WinSize{Rows: uint16(r), Cols: uint16(c)}:
							case <-stop:
								return
							}
						}
					case <-stop:
						return
					}
				}
			}()
			env := map[string]string{}
			if v := a.getenv("TERM"); v != "" {
				env["TERM"] = v
			}
			code, err := t.Shell(ctx, sandbox.TerminalOptions{Stdin: in, Stdout: a.stdout,
				Size: sandbox.WinSize{Rows: uint16(rows), Cols: uint16(cols)}, Resize: resize, Env: env})
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
