package shellwrap

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Provider is what Run needs from a sandbox: start a process, and read and write a file.
// Errors it returns are passed on as they are, so a backend maps its provider's errors there.
type Provider interface {
	// Start starts c. The process is stopped by Run killing it (a second Start of KillTree),
	// not by ctx, which only bounds the start.
	Start(ctx context.Context, c Call) (Process, error)
	// ReadFile returns a file's contents; a missing file is an error.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// WriteFile creates or replaces a file, with its parent directories.
	WriteFile(ctx context.Context, path string, data []byte) error
}

// Call is one process for a Provider to start.
type Call struct {
	Argv  []string
	Env   map[string]string // added to the sandbox's environment
	Stdin io.Reader         // nil: no input
	// Stdout and Stderr receive the output as it comes; they are nil for a kill.
	Stdout, Stderr io.Writer
	// State and PidFile are the wrapper's state and pid files (Argv names them too), for a
	// provider whose process reports them itself (StateProcess); "" for a kill.
	State, PidFile string
}

// Process is a started Call.
type Process interface {
	// Wait returns the process's exit code once it has ended and its output was written.
	Wait(ctx context.Context) (int, error)
}

// StateProcess is a Process that learns how the wrapper ended along with its exit, so Run
// reads no files after it. WaitState is called instead of Wait.
type StateProcess interface {
	Process
	WaitState(ctx context.Context) (Exit, error)
}

// Exit is how a wrapped command ended, as a StateProcess reports it.
type Exit struct {
	Code    int
	Cwd     string // the saved directory; "" if unknown
	Unsaved bool   // the wrapper left its pid file: the state was not saved
	NoDir   bool   // the wrapper could not enter cmd.Dir (HERMES_FB_NODIR)
}

// Killer is a Process that kills its own process tree (by default Run starts KillTree).
type Killer interface {
	Kill(ctx context.Context)
}

// Options configures Run for one backend's session.
type Options struct {
	Backend string // for errors
	Session string // the session's name: its state is Dir/Session.env
	// Dir is the directory in the sandbox for the state, pid and script files: absolute, or
	// relative to the sandbox user's home ($HOME) where the provider resolves it (the wrapper
	// does; ReadFile and WriteFile must too).
	Dir string
	// PassEnv is added to each command's environment (terminal.env_passthrough) before the
	// session's state is restored, so it seeds a new session and the state wins over it.
	PassEnv map[string]string
	// MaxArgv bounds the command line in bytes (0: no bound). A longer script is written to a
	// file and sourced; a longer argv is refused with ErrInvalidConfig.
	MaxArgv  int
	SpillDir string
	Log      *slog.Logger
}

// killWait bounds the kill of a command that timed out or was cancelled, and the wait for its
// end after it.
const killWait = 30 * time.Second

// Run runs cmd as its own process of Wrapper through p: the session's directory and exported
// variables come from the state file and are saved to it again, cmd.Dir and cmd.Env apply to
// this command only, and the output is captured with cmd.OutputLimit. On cmd.Timeout (exit
// 124) or when ctx ends (exit 130, with an error wrapping ctx's) the command's process tree
// is killed through a second process. A command that ended without saving its state (its
// pid file is left) is reported in Result.StateNotSaved; Result.Cwd is the saved directory.
// A missing cmd.Dir is ErrNotFound where the process reports it (Exit.NoDir).
func Run(ctx context.Context, p Provider, o Options, cmd sandbox.Command) (*sandbox.Result, error) {
	start := time.Now()
	fail := func(err error) (*sandbox.Result, error) {
		return nil, &sandbox.Error{Backend: o.Backend, Op: "exec", ID: o.Session, Err: err}
	}
	if cmd.Script == "" && len(cmd.Argv) == 0 {
		return fail(fmt.Errorf("empty command: %w", sandbox.ErrInvalidConfig))
	}
	prefix := o.Dir + "/" + o.Session + "." + sandbox.RandomHex(8)
	state, pidFile := o.Dir+"/"+o.Session+".env", prefix+".pid"
	argv := []string{"/bin/sh", "-c", Wrapper, "sh", state, pidFile}
	size := 0
	for _, a := range argv {
		size += len(a)
	}
	switch {
	case len(cmd.Argv) > 0:
		argv = append(append(argv, "argv", ""), cmd.Argv...)
		for _, a := range cmd.Argv {
			size += len(a)
		}
		if o.MaxArgv > 0 && size > o.MaxArgv {
			return fail(fmt.Errorf("the command line is %d bytes; a %s exec takes at most %d: pass long data through stdin or a file (write_file): %w",
				size, o.Backend, o.MaxArgv, sandbox.ErrInvalidConfig))
		}
	case o.MaxArgv > 0 && size+len(cmd.Script) > o.MaxArgv:
		// Too long for a command line: send the script as a file.
		if err := p.WriteFile(ctx, prefix+".sh", []byte(cmd.Script)); err != nil {
			return nil, err
		}
		argv = append(argv, "file", prefix+".sh")
	default:
		argv = append(argv, "eval", cmd.Script)
	}
	env, err := Env(o.PassEnv, cmd.Env)
	if err != nil {
		return fail(fmt.Errorf("%v: %w", err, sandbox.ErrInvalidConfig))
	}
	if cmd.Dir != "" {
		env["HERMES_FB_DIR"] = cmd.Dir
	}
	capture := sandbox.NewCapture(cmd.OutputLimit, o.SpillDir).ForSession(o.Session, cmd.SpillLimit)
	stdout, stderr := capture.Tee(cmd.Stdout, cmd.Stderr)
	runCtx := context.WithoutCancel(ctx) // the command is stopped by killing it, not by dropping the call
	proc, err := p.Start(runCtx, Call{Argv: argv, Env: env, Stdin: cmd.Stdin, Stdout: stdout, Stderr: stderr,
		State: state, PidFile: pidFile})
	if err != nil {
		return nil, err
	}
	type waited struct {
		exit Exit
		err  error
	}
	done := make(chan waited, 1)
	wctx, stopWait := context.WithCancel(runCtx) // stops the wait of a command that outlived its kill
	defer stopWait()
	sp, reports := proc.(StateProcess)
	go func() {
		var w waited
		if reports {
			w.exit, w.err = sp.WaitState(wctx)
		} else {
			w.exit.Code, w.err = proc.Wait(wctx)
		}
		done <- w
	}()
	res := &sandbox.Result{}
	var w waited
	w, res.TimedOut, res.Interrupted = Await(ctx, cmd.Timeout, done)
	if res.TimedOut || res.Interrupted {
		kctx, cancel := context.WithTimeout(runCtx, killWait)
		if k, ok := proc.(Killer); ok {
			k.Kill(kctx)
		} else if kp, err := p.Start(kctx, Call{Argv: []string{"/bin/sh", "-c", KillTree, "sh", pidFile}}); err == nil {
			kp.Wait(kctx)
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
			return nil, w.err
		}
		res.ExitCode = w.exit.Code
	}
	if reports {
		res.Cwd = w.exit.Cwd
	} else {
		// The wrapper removes its pid file once the state is saved: a pid file left by a
		// command that was not killed means its state was not saved. Both reads go at once.
		unsaved := make(chan bool, 1)
		go func() {
			if res.TimedOut || res.Interrupted {
				unsaved <- false
				return
			}
			_, err := p.ReadFile(runCtx, pidFile)
			unsaved <- err == nil
		}()
		if data, err := p.ReadFile(runCtx, state+".cwd"); err == nil {
			res.Cwd = string(data)
		}
		w.exit.Unsaved = <-unsaved
	}
	if !res.TimedOut && !res.Interrupted {
		if w.exit.NoDir {
			return fail(fmt.Errorf("no such directory %q: %w", cmd.Dir, sandbox.ErrNotFound))
		}
		if w.exit.Unsaved {
			res.StateNotSaved, res.StateError = true, StateNotSavedReason
		}
	}
	res.Duration = time.Since(start)
	if err := capture.Finish(res); err != nil && o.Log != nil {
		o.Log.Warn("output spill failed", "err", err)
	}
	if res.Interrupted {
		return res, fmt.Errorf("exec interrupted: %w", ctx.Err())
	}
	return res, nil
}

// Env returns the variables for one command: base, then cmd's (which win), with
// HERMES_FB_CMDENV naming cmd's (sorted), so that the wrapper applies them over the session's
// state and does not save them. It fails on a name in cmd that the wrapper cannot carry.
func Env(base, cmd map[string]string) (map[string]string, error) {
	if err := CheckNames(cmd); err != nil {
		return nil, err
	}
	env := make(map[string]string, len(base)+len(cmd)+1)
	for k, v := range base {
		env[k] = v
	}
	names := make([]string, 0, len(cmd))
	for k, v := range cmd {
		env[k] = v
		names = append(names, k)
	}
	if len(names) > 0 {
		sort.Strings(names)
		env["HERMES_FB_CMDENV"] = strings.Join(names, " ")
	}
	return env, nil
}
