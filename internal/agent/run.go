//go:build unix

package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/proctree"
)

// wrapper runs the user's script in the session's shell. The working directory and exported
// environment are saved when the script returns, and by an exit trap when it calls exit, so
// `cd` and `export` carry over even when the script sets its own EXIT trap. The save ends
// with a marker, so a save cut short (a full disk) is recognised and reported. The script
// arrives in an environment variable (or a file, when large) so it is never parsed by anything
// but the shell. The wrapper is one line, so the shell's error messages carry the user's own
// line numbers ("line 1: nosuchprog: command not found").
const wrapper = `__hermes_st=$__HERMES_STATE; __hermes_src=$__HERMES_SCRIPT; __hermes_file=$__HERMES_SCRIPT_FILE; ` +
	`unset __HERMES_STATE __HERMES_SCRIPT __HERMES_SCRIPT_FILE; ` +
	`__hermes_save() { { printf "%s\0" "$PWD"; export -p; printf "\0` + stateEnd + `"; } 2>/dev/null >"$__hermes_st" || :; __hermes_saved=1; }; ` +
	`trap '__hermes_rc=$?; [ -n "${__hermes_saved-}" ] || __hermes_save; exit $__hermes_rc' EXIT; ` +
	`if [ -n "$__hermes_file" ]; then . "$__hermes_file"; else eval "$__hermes_src"; fi; ` +
	`__hermes_rc=$?; __hermes_save; exit $__hermes_rc`

// stateEnd closes a complete state save.
const stateEnd = "hermes-state-end"

// largeScript is the size above which a script goes through a file: one environment string
// may not exceed 128 KiB on Linux.
const largeScript = 64 << 10

type run struct {
	s       *Server
	id      uint32
	proc    *os.Process
	stdin   io.WriteCloser
	stdinMu sync.Mutex // serialises writes to stdin

	pty *os.File // set for terminal sessions

	mu     sync.Mutex
	reason string // guarded by mu; why it was killed, if it was
	exited bool   // guarded by mu; the main process is gone: its pid may be reused, so kill must not act
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// prepared is a command ready to start.
type prepared struct {
	argv     []string
	env      []string
	cwd      string
	stateF   string
	base     base // the session's state the command started from
	scriptF  string
	notFound string // set when argv[0] cannot be found: the message for stderr
	exitCode int
}

func (s *Server) prepare(req RunRequest) (*prepared, error) {
	// A command may have deleted the state directory (it lives in /tmp in containers).
	if err := os.MkdirAll(s.scratchDir(), 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	cwd, env, b := s.state.begin()
	if req.Dir != "" {
		dir := s.resolve(req.Dir)
		fi, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("working directory %s: %w", req.Dir, errors.Unwrap(err))
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("working directory %s: not a directory: %w", req.Dir, errInvalid)
		}
		cwd = dir
	}
	if _, err := os.Stat(cwd); err != nil {
		// The session's directory vanished; start from home, like a shell would complain.
		cwd = homeOr(b.env, "/")
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("environment name %q: %w", k, errInvalid)
		}
		env = append(env, k+"="+string(v))
	}
	p := &prepared{cwd: cwd, env: env, base: b}
	if req.Script != "" && len(req.Argv) == 0 {
		if argv, ok := simpleCommand(string(req.Script), env); ok {
			if path, err := lookPath(argv[0], envGet(env, "PATH"), cwd); err == nil {
				p.argv = append([]string{path}, argv[1:]...)
				return p, nil
			}
			// Not found, or not executable: the shell says so in its own words.
		}
	}
	switch {
	case req.Script != "" && len(req.Argv) > 0:
		return nil, fmt.Errorf("both script and argv given: %w", errInvalid)
	case len(req.Argv) > 0:
		path, err := lookPath(string(req.Argv[0]), envGet(env, "PATH"), cwd)
		if err != nil {
			p.notFound, p.exitCode = err.Error(), 127
			if errors.Is(err, os.ErrPermission) {
				p.exitCode = 126
			}
			return p, nil
		}
		p.argv = append([]string{path}, stringsOf(req.Argv[1:])...)
	default:
		p.stateF = filepath.Join(s.scratchDir(), "run-"+randomHex(8)+".state")
		p.env = append(p.env, "__HERMES_STATE="+p.stateF)
		if len(req.Script) > largeScript {
			p.scriptF = filepath.Join(s.scratchDir(), "run-"+randomHex(8)+".sh")
			if err := os.WriteFile(p.scriptF, []byte(req.Script), 0o600); err != nil {
				return nil, err
			}
			p.env = append(p.env, "__HERMES_SCRIPT_FILE="+p.scriptF)
		} else {
			p.env = append(p.env, "__HERMES_SCRIPT="+string(req.Script))
		}
		p.argv = []string{s.shell, "-c", wrapper, "hermes"}
	}
	return p, nil
}

func (p *prepared) cleanup() {
	if p.stateF != "" {
		os.Remove(p.stateF)
	}
	if p.scriptF != "" {
		os.Remove(p.scriptF)
	}
}

func (s *Server) startRun(id uint32, req RunRequest) {
	p, err := s.prepare(req)
	if err != nil {
		s.sendErrFrom(id, err)
		return
	}
	start := time.Now()
	if p.notFound != "" {
		_ = s.out.write(tStderr, id, []byte("hermes: "+p.notFound+"\n"))
		_ = s.send(tExit, id, ExitInfo{Code: p.exitCode, Cwd: p.cwd, DurationNS: int64(time.Since(start))})
		return
	}
	// exec.Cmd makes the pipes and closes them on every path; its copying goroutines stream
	// the output as frames, and WaitDelay stops the wait for a daemon that escaped the process
	// group but still holds them.
	cmd := &exec.Cmd{
		Path:        p.argv[0],
		Args:        p.argv,
		Dir:         p.cwd,
		Env:         p.env,
		Stdout:      streamWriter{s, tStdout, id},
		Stderr:      streamWriter{s, tStderr, id},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		WaitDelay:   200 * time.Millisecond,
	}
	var stdin io.WriteCloser
	if req.Stdin {
		if stdin, err = cmd.StdinPipe(); err != nil {
			p.cleanup()
			s.sendErrFrom(id, err)
			return
		}
	}
	s.startProcess(func() { err = cmd.Start() })
	if err != nil {
		p.cleanup()
		s.sendErrFrom(id, fmt.Errorf("start %s: %w", p.argv[0], err))
		return
	}
	rn := &run{s: s, id: id, proc: cmd.Process, stdin: stdin}
	if s.opts.Guard {
		s.guard.add(cmd.Process.Pid)
	}
	s.mu.Lock()
	s.runs[id] = rn
	s.mu.Unlock()
	s.goTracked(func() { rn.wait(p, req, cmd, start) })
}

// streamWriter sends what a command writes as frames of one type. When the client is gone it
// still reports success, so the command is never blocked on a full pipe.
type streamWriter struct {
	s   *Server
	typ frameType
	id  uint32
}

func (w streamWriter) Write(b []byte) (int, error) {
	_ = w.s.out.write(w.typ, w.id, b)
	return len(b), nil
}

func (rn *run) wait(p *prepared, req RunRequest, cmd *exec.Cmd, start time.Time) {
	s := rn.s
	defer p.cleanup()
	var timer *time.Timer
	if req.TimeoutMS > 0 {
		timer = time.AfterFunc(time.Duration(req.TimeoutMS)*time.Millisecond, func() { rn.kill(reasonTimeout) })
	}
	rn.waitExit()
	if timer != nil {
		timer.Stop()
	}
	// Whatever the command left in its process group dies with it: a finished command leaves
	// nothing running (background jobs are the way to keep a process).
	_ = unix.Kill(-rn.proc.Pid, unix.SIGKILL)
	if s.opts.Guard {
		s.guard.remove(rn.proc.Pid)
	}
	reason := rn.markExited()
	// Wait reaps the process, then waits for the output to drain, at most WaitDelay.
	_ = cmd.Wait()
	ps := cmd.ProcessState
	rn.closeStdin()

	s.mu.Lock()
	delete(s.runs, rn.id)
	s.mu.Unlock()

	ex := ExitInfo{DurationNS: int64(time.Since(start))}
	if ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ex.Code = 128 + int(ws.Signal())
			ex.Signal = unix.SignalName(ws.Signal())
		} else {
			ex.Code = ps.ExitCode()
		}
	}
	switch reason {
	case reasonTimeout:
		ex.Code, ex.TimedOut = 124, true
	case reasonInterrupt:
		ex.Code, ex.Interrupted = 130, true
	}

	ex.Cwd = p.cwd
	if p.stateF != "" {
		ex.Cwd, ex.StateError = s.applyState(p, req, reason != "", ex.Signal != "")
	}
	if ex.Cwd == "" {
		ex.Cwd, _ = s.state.snapshot()
	}
	_ = s.send(tExit, rn.id, ex)
}

// applyState takes what a script saved into the session's state. It returns the working
// directory after the script and, when the script's state could not be saved, why. A command
// killed on purpose (timeout, interrupt) has nothing to save and reports nothing.
func (s *Server) applyState(p *prepared, req RunRequest, killed, signaled bool) (string, string) {
	b, err := os.ReadFile(p.stateF)
	body, complete := bytes.CutSuffix(b, []byte("\x00"+stateEnd))
	if err != nil || !complete {
		cwd, _ := s.state.snapshot()
		switch {
		case killed:
			return cwd, ""
		case signaled:
			return cwd, "the shell was killed before it could save them"
		case err == nil || errors.Is(err, os.ErrNotExist):
			return cwd, "the shell could not write them to " + filepath.Dir(p.stateF) + " (is the disk full?), or the script left through exec or through exit with its own EXIT trap"
		}
		return cwd, "read the saved state: " + err.Error()
	}
	if s.state.unchanged(body, p.base) {
		cwd, _ := s.state.snapshot()
		return cwd, ""
	}
	cwd, env, err := parseTrapState(body)
	if err != nil {
		old, _ := s.state.snapshot()
		return old, "read the saved state: " + err.Error()
	}
	if err := s.state.update(body, p.base, cwd, env, fromBytesMap(req.Env)); err != nil {
		old, _ := s.state.snapshot()
		return old, err.Error()
	}
	return cwd, ""
}

func (rn *run) stdinFrame(f frame) {
	rn.stdinMu.Lock()
	defer rn.stdinMu.Unlock()
	if rn.stdin == nil {
		return
	}
	if f.typ == tEOF {
		rn.stdin.Close()
		rn.stdin = nil
		return
	}
	if _, err := rn.stdin.Write(f.payload); err != nil {
		// The command stopped reading; drop further input.
		rn.stdin.Close()
		rn.stdin = nil
	}
}

func (rn *run) closeStdin() {
	rn.stdinMu.Lock()
	defer rn.stdinMu.Unlock()
	if rn.stdin != nil {
		rn.stdin.Close()
		rn.stdin = nil
	}
}

// kill ends the command's whole process tree; the first reason given wins.
func (rn *run) kill(reason string) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.exited || rn.reason != "" {
		return
	}
	rn.reason = reason
	proctree.Kill(rn.proc.Pid)
}

// waitExit waits until the main process has exited, without reaping it, so its pid and
// process group cannot be reused while the rest of the group is killed.
func (rn *run) waitExit() { waitExited(rn.proc.Pid) }

// markExited is called just before the main process is reaped; it returns why the command
// was killed, if it was.
func (rn *run) markExited() string {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.exited = true
	return rn.reason
}

// lookPath finds a program like a shell does: a name with a slash is taken as a path
// (relative to dir), otherwise PATH is searched.
func lookPath(name, pathEnv, dir string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("empty command name: %w", errInvalid)
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("%s: No such file or directory", name)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s: Permission denied: %w", name, os.ErrPermission)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if p := filepath.Join(d, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found", name)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
