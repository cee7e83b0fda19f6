package ssh

import (
	"context"
	"errors"
	"io"
	"io/fs"

	"github.com/hermes-sandbox/hermes-sandbox/internal/shellwrap"
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
	env, err := shellwrap.ParseExports(string(b))
	return cwd, env, err
}
