package gate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// ToolShellLine is the audit tool name of one line entered in the interactive shell.
const ToolShellLine = "shell_line"

// Shell is the interactive shell as a gated door: it reads the person's input one complete
// shell line at a time (a line that does not parse yet, such as an open quote or a trailing
// `|`, asks for more), and runs each line as a command of the session through the gate, so
// every line is classified before it runs, hardline lines are refused, dangerous ones asked
// about, and the audit log records each line with its verdict. The working directory and
// exported variables carry over from line to line, as in any session. Lines run without a
// pseudo-terminal and with no input, so full-screen programs are not available here.
func (s *Session) Shell(ctx context.Context, opts sandbox.TerminalOptions) (int, error) {
	if opts.Stdin == nil || opts.Stdout == nil {
		return 0, fmt.Errorf("interactive shell: no terminal: %w", sandbox.ErrInvalidConfig)
	}
	// The gated shell is a door onto the backend's own; a backend without one has none.
	if !s.b.inner.Capabilities().Terminal {
		return 0, fmt.Errorf("interactive shell: the %s backend has no terminal here: %w", s.b.inner.Name(), sandbox.ErrUnsupported)
	}
	c := &call{tool: "shell", label: "interactive shell", command: "(interactive shell)", classify: ":", plain: true,
		switches: []toolSwitch{{s.b.opts.Tools.ShellExecute, "shell_execute"}}}
	if err := s.admit(ctx, c); err != nil {
		return 0, err
	}
	code, err := s.lineLoop(ctx, opts)
	s.record(ctx, c, &sandbox.Result{ExitCode: code}, err)
	return code, err
}

func (s *Session) lineLoop(ctx context.Context, opts sandbox.TerminalOptions) (int, error) {
	out := opts.Stdout
	in := bufio.NewReader(opts.Stdin)
	parser := syntax.NewParser(syntax.Variant(syntax.LangBash))
	code := 0
	for {
		fmt.Fprint(out, s.prompt(ctx))
		text, err := readLogicalLine(in, out, parser)
		if err != nil {
			if errors.Is(err, io.EOF) {
				fmt.Fprintln(out)
				return code, nil
			}
			return code, err
		}
		words := strings.Fields(text)
		if len(words) == 0 {
			continue
		}
		if (words[0] == "exit" || words[0] == "logout") && len(words) <= 2 {
			if len(words) == 2 {
				n, err := strconv.Atoi(words[1])
				if err != nil {
					fmt.Fprintf(out, "hermes-sandbox: exit: %s: numeric argument required\n", words[1])
					continue
				}
				code = n
			}
			return code, nil
		}
		c := s.commandCall(ToolShellLine, "shell line", sandbox.Command{Script: text})
		if err := s.admit(ctx, c); err != nil {
			fmt.Fprintf(out, "hermes-sandbox: %v\n", err)
			code = sandbox.ExitNotExec
			continue
		}
		res, err := s.inner.Exec(ctx, sandbox.Command{Script: text, Env: opts.Env, Stdout: out, Stderr: out})
		s.record(ctx, c, res, err)
		if err != nil {
			if ctx.Err() != nil {
				return sandbox.ExitInterrupted, nil
			}
			fmt.Fprintf(out, "hermes-sandbox: %v\n", err)
			code = 1
			continue
		}
		code = res.ExitCode
	}
}

// prompt shows the session's directory.
func (s *Session) prompt(ctx context.Context) string {
	if st, ok := s.inner.(ShellStater); ok {
		if cwd, _, err := st.ShellState(ctx); err == nil {
			return "[" + s.inner.Name() + "] " + cwd + " $ "
		}
	}
	return "[" + s.inner.Name() + "] $ "
}

// readLogicalLine reads lines until they form complete shell input.
func readLogicalLine(in *bufio.Reader, out io.Writer, p *syntax.Parser) (string, error) {
	var sb strings.Builder
	for {
		line, err := in.ReadString('\n')
		sb.WriteString(line)
		if err != nil {
			if sb.Len() > 0 && errors.Is(err, io.EOF) && strings.TrimSpace(sb.String()) != "" {
				return sb.String(), nil
			}
			return "", err
		}
		_, perr := p.Parse(strings.NewReader(sb.String()), "")
		if perr == nil || !syntax.IsIncomplete(perr) {
			return sb.String(), nil
		}
		fmt.Fprint(out, "> ")
	}
}
