package ssh

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// ShellState returns the session's directory and exported environment as the wrapper saved
// them after the last command (`export -p` in shell.env), so the gate can classify the next
// command where it will run. Before any command has saved state the environment is nil
// (unknown): nothing has been changed yet.
func (s *shellSession) ShellState(ctx context.Context) (string, map[string]string, error) {
	s.mu.Lock()
	cwd, dir := s.cwd, s.stateDir
	s.mu.Unlock()
	if dir == "" {
		return cwd, nil, nil
	}
	cl, err := s.h.sftp(ctx)
	if err != nil {
		return cwd, nil, err
	}
	f, err := cl.Open(dir + "/shell.env")
	if errors.Is(err, fs.ErrNotExist) {
		return cwd, nil, nil
	}
	if err != nil {
		return cwd, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return cwd, nil, err
	}
	env, err := parseExports(string(b))
	return cwd, env, err
}

// parseExports reads `export -p` output: export NAME='value' (or declare -x NAME="value").
func parseExports(text string) (map[string]string, error) {
	file, err := syntax.NewParser().Parse(strings.NewReader(text), "shell.env")
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, st := range file.Stmts {
		switch x := st.Cmd.(type) {
		case *syntax.DeclClause:
			for _, as := range x.Args {
				if as.Name == nil || as.Naked && as.Value == nil {
					continue
				}
				v := ""
				if as.Value != nil {
					if v, err = expand.Literal(&expand.Config{}, as.Value); err != nil {
						return nil, err
					}
				}
				env[as.Name.Value] = v
			}
		case *syntax.CallExpr:
			for _, w := range x.Args[min(1, len(x.Args)):] {
				lit, err := expand.Literal(&expand.Config{}, w)
				if err != nil {
					return nil, err
				}
				if k, v, ok := strings.Cut(lit, "="); ok {
					env[k] = v
				}
			}
		}
	}
	return env, nil
}
