package gate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"strings"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/policy"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// ShellStater is implemented by sessions that can report their shell state: the working
// directory and exported environment that the next command starts with. The gate classifies
// every command in that state; a session without it is classified with an unknown directory,
// so relative paths are never taken to be inside the working tree.
type ShellStater interface {
	ShellState(ctx context.Context) (cwd string, env map[string]string, err error)
}

// stateTimeout bounds asking the session for its state, and readTimeout reading one file the
// command runs; past them the gate judges without (unknown → needs approval).
const (
	stateTimeout = 10 * time.Second
	readTimeout  = 10 * time.Second
)

// sessionContext is the policy context a call is classified in: the session's state, with
// the command's own directory and variables on top.
func (s *Session) sessionContext(ctx context.Context, dir string, env map[string]string) policy.Context {
	sc := policy.Context{CmdEnv: env, Host: s.b.host}
	cwd, senv := s.shellState(ctx)
	sc.Env = maps.Clone(senv)
	if sc.Env == nil && len(env) > 0 {
		sc.Env = map[string]string{}
	}
	maps.Copy(sc.Env, env)
	switch {
	case dir == "":
		sc.Dir = cwd
	case path.IsAbs(dir):
		sc.Dir = path.Clean(dir)
	case dir == "~" || strings.HasPrefix(dir, "~/"):
		if h := senv["HOME"]; path.IsAbs(h) {
			sc.Dir = path.Join(h, dir[1:])
		}
	case cwd != "":
		sc.Dir = path.Join(cwd, dir)
	}
	s.remember(cwd, senv["PATH"])
	s.mu.Lock()
	sc.BasePath, sc.WorkDir = s.basePath, s.workDir
	s.mu.Unlock()
	if fsys, ok := s.inner.(sandbox.FileSystem); ok {
		sc.ReadFile = func(p string) ([]byte, error) { return readForCheck(ctx, fsys, p) }
	}
	return sc
}

// shellState is the session's directory (absolute and clean, or "" when unknown) and
// exported environment, as the session reports them.
func (s *Session) shellState(ctx context.Context) (cwd string, env map[string]string) {
	st, ok := s.inner.(ShellStater)
	if !ok {
		return "", nil
	}
	sctx, cancel := context.WithTimeout(ctx, stateTimeout)
	c, e, err := st.ShellState(sctx)
	cancel()
	switch {
	case err != nil:
		s.b.opts.Logger.Debug("session state unknown", "err", err)
		return "", nil
	case !path.IsAbs(c):
		return "", nil
	}
	return path.Clean(c), e
}

// remember keeps the session's PATH and directory as first seen (persisted, so a later CLI
// run compares with the session's start, not with what an earlier command changed).
func (s *Session) remember(cwd, pathVar string) {
	s.mu.Lock()
	known := s.basePath != "" || cwd == ""
	s.mu.Unlock()
	if known {
		return
	}
	upd := func(st *storedSession) {
		if st.BasePath == "" {
			st.BasePath, st.WorkDir = pathVar, cwd
		}
	}
	st := storedSession{}
	upd(&st)
	if s.b.opts.Store != nil {
		saved, err := s.b.opts.Store.update(s.b.inner.Name(), s.inner.Name(), upd)
		if err != nil {
			s.setStoreErr(err)
			return
		}
		st = saved
	}
	s.mu.Lock()
	s.basePath, s.workDir = st.BasePath, st.WorkDir
	s.mu.Unlock()
}

// readForCheck reads at most policy.MaxScriptRead bytes of a file the command would run.
func readForCheck(ctx context.Context, fsys sandbox.FileSystem, p string) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	b, err := fsys.ReadFile(rctx, p, 0, policy.MaxScriptRead+1)
	switch {
	case errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
		return nil, fs.ErrNotExist
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("not read within %s", readTimeout)
	case err != nil:
		return nil, err
	case len(b) > policy.MaxScriptRead:
		return nil, fmt.Errorf("%w (%d KiB)", policy.ErrTooLarge, policy.MaxScriptRead>>10)
	}
	return b, nil
}

// executableName reports whether a file written with this name or mode is meant to be run.
func executableName(p string, mode uint32, data []byte) bool {
	if mode&0o111 != 0 || strings.HasPrefix(string(data[:min(len(data), 2)]), "#!") {
		return true
	}
	switch path.Ext(p) {
	case ".sh", ".bash", ".zsh", ".ksh", ".py", ".pl", ".rb", ".js", ".mjs", ".cjs", ".php", ".lua":
		return true
	}
	return false
}
