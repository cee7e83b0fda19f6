package modal

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"

	"github.com/hermes-sandbox/hermes-sandbox/internal/shellwrap"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// The fallback runs each command as its own Exec of shellwrap.Wrapper, which restores the
// session's directory and exported variables from a state file, runs the command in the same
// shell, and saves them again on exit (even after `exit N`). The wrapper writes its pid first,
// so a timeout or cancel kills the command's whole process tree (shellwrap.KillTree) with a
// second Exec.

// fallbackDir holds the state files inside the sandbox.
const fallbackDir = hermesDir + "/fallback"

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sandboxForFallback returns the session's sandbox, making sure it runs.
func (s *session) sandboxForFallback(ctx context.Context) (*modalsdk.Sandbox, bool, error) {
	s.mu.Lock()
	known := s.sb
	s.mu.Unlock()
	sb, recreated, err := s.b.ensure(ctx, s.name, known)
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	s.sb = sb
	recreated = recreated || s.recreated
	s.recreated = false
	s.mu.Unlock()
	return sb, recreated, nil
}

// execFallback runs cmd as one Exec.
func (s *session) execFallback(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	b := s.b
	if cmd.Script == "" && len(cmd.Argv) == 0 {
		return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: fmt.Errorf("empty command: %w", sandbox.ErrInvalidConfig)}
	}
	start := time.Now()
	sb, recreated, err := s.sandboxForFallback(ctx)
	if err != nil {
		return nil, err
	}
	state := fallbackDir + "/" + s.name + ".env"
	pidFile := fallbackDir + "/" + s.name + "." + randomID() + ".pid"
	argv := []string{"/bin/sh", "-c", shellwrap.Wrapper, "sh", state, pidFile}
	switch {
	case len(cmd.Argv) > 0:
		argv = append(argv, "argv", "")
		argv = append(argv, cmd.Argv...)
		if n := argvBytes(argv); n > MaxArgvBytes {
			return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: fmt.Errorf(
				"the command line is %d bytes; a Modal exec takes at most %d: pass long data through stdin or a file (write_file): %w", n, MaxArgvBytes, sandbox.ErrInvalidConfig)}
		}
	case argvBytes(argv)+len(cmd.Script) > MaxArgvBytes:
		// Too long for a command line: send the script as a file.
		p := fallbackDir + "/" + s.name + "." + randomID() + ".sh"
		if err := sb.Filesystem.WriteBytes(ctx, []byte(cmd.Script), p, nil); err != nil {
			return nil, b.mapErr("exec", s.name, err)
		}
		argv = append(argv, "file", p)
	default:
		argv = append(argv, "eval", cmd.Script)
	}
	if err := shellwrap.CheckNames(cmd.Env); err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "exec", ID: s.name, Err: fmt.Errorf("%v: %w", err, sandbox.ErrInvalidConfig)}
	}
	env := map[string]string{}
	for k, v := range b.passEnv {
		env[k] = v
	}
	var names []string
	for k, v := range cmd.Env {
		env[k] = v
		names = append(names, k)
	}
	if len(names) > 0 {
		// Variables for this command only are not saved with the session's state.
		env["HERMES_FB_CMDENV"] = strings.Join(names, " ")
	}
	if cmd.Dir != "" {
		env["HERMES_FB_DIR"] = cmd.Dir
	}
	runCtx := context.WithoutCancel(ctx) // the command is stopped by killing it, not by dropping the call
	cp, err := sb.Exec(runCtx, argv, &modalsdk.SandboxExecParams{Env: env})
	if err != nil {
		return nil, b.mapErr("exec", s.name, err)
	}
	capture := sandbox.NewCapture(cmd.OutputLimit, b.spillDir).ForSession(s.name, cmd.SpillLimit)
	stdout, stderr := capture.Tee(cmd.Stdout, cmd.Stderr)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(stdout, cp.Stdout) }()
	go func() { defer wg.Done(); io.Copy(stderr, cp.Stderr) }()
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		if cmd.Stdin != nil {
			bw := bufio.NewWriterSize(cp.Stdin, 256<<10)
			io.Copy(bw, cmd.Stdin)
			bw.Flush()
		}
		cp.Stdin.Close()
	}()
	type waited struct {
		code int
		err  error
	}
	done := make(chan waited, 1)
	go func() {
		code, err := cp.Wait(runCtx, nil)
		done <- waited{code, err}
	}()
	res := &sandbox.Result{EnvironmentRecreated: recreated}
	var w waited
	w, res.TimedOut, res.Interrupted = shellwrap.Await(ctx, cmd.Timeout, done)
	if res.TimedOut || res.Interrupted {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if kp, err := sb.Exec(kctx, []string{"/bin/sh", "-c", shellwrap.KillTree, "sh", pidFile}, nil); err == nil {
			kp.Wait(kctx, nil)
		}
		select {
		case w = <-done:
		case <-kctx.Done():
		}
		cancel()
		res.ExitCode = sandbox.ExitTimeout
		if res.Interrupted {
			res.ExitCode = sandbox.ExitInterrupted
		}
	} else {
		if w.err != nil {
			return nil, b.mapErr("exec", s.name, w.err)
		}
		res.ExitCode = w.code
	}
	wg.Wait()
	select {
	case <-stdinDone:
	case <-time.After(time.Second): // the command ended without reading all its input
	}
	// The wrapper removes its pid file once the state is saved: a pid file left by a command
	// that was not killed means its state was not saved. Both reads go at once.
	fctx := context.WithoutCancel(ctx)
	unsaved := make(chan bool, 1)
	go func() {
		if res.TimedOut || res.Interrupted {
			unsaved <- false
			return
		}
		_, err := sb.Filesystem.ReadBytes(fctx, pidFile, nil)
		unsaved <- err == nil
	}()
	if data, err := sb.Filesystem.ReadBytes(fctx, state+".cwd", nil); err == nil {
		res.Cwd = string(data)
	}
	if <-unsaved {
		res.StateNotSaved, res.StateError = true, shellwrap.StateNotSavedReason
	}
	res.Duration = time.Since(start)
	if err := capture.Finish(res); err != nil {
		b.log.Warn("output spill failed", "err", err)
	}
	if res.Interrupted {
		return res, fmt.Errorf("exec interrupted: %w", ctx.Err())
	}
	return res, nil
}

func argvBytes(argv []string) int {
	n := 0
	for _, a := range argv {
		n += len(a)
	}
	return n
}
