package singularity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os/exec"
	"strings"
	"sync"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// wrap gives err the backend's shape, "singularity: OP ID: cause", once.
func wrap(op, id string, err error) error {
	if err == nil {
		return nil
	}
	var se *sandbox.Error
	if errors.As(err, &se) && se.Backend == Name {
		return err
	}
	return &sandbox.Error{Backend: Name, Op: op, ID: id, Err: err}
}

// runtimeError is a failed run of the apptainer (or singularity) command line: what ran, its
// exit code and the end of what it printed on stderr.
type runtimeError struct {
	exe    string
	args   []string // the subcommand words, for the message (e.g. "instance start")
	code   int
	stderr string
	err    error // *exec.ExitError
}

func (e *runtimeError) Error() string {
	msg := fmt.Sprintf("`%s %s` exited %d", e.exe, strings.Join(e.args, " "), e.code)
	if e.stderr != "" {
		msg += ": " + e.stderr
	}
	return msg
}

func (e *runtimeError) Unwrap() error { return e.err }

// missingError says no container runtime is installed, and what to do about it.
type missingError struct{ tried []string }

func (e *missingError) Error() string {
	return fmt.Sprintf("no container runtime found (looked for %s): install apptainer (https://apptainer.org) or set singularity.executable",
		strings.Join(e.tried, ", "))
}

func (e *missingError) Unwrap() error { return sandbox.ErrUnavailable }

// kindError is a cause that also matches a sandbox sentinel.
type kindError struct {
	kind  error
	cause error
}

func (e *kindError) Error() string   { return e.cause.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.cause} }

// runtimeErr maps a failure to run the runtime to the sandbox sentinels with typed checks,
// once, here: a missing or unrunnable executable is ErrUnavailable; a non-zero exit becomes
// a runtimeError carrying stderr; a cancelled context stays what it is.
func runtimeErr(exe string, words []string, err error, stderr []byte) error {
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return &runtimeError{exe: exe, args: words, code: ee.ExitCode(), stderr: tail(stderr, 600), err: err}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return &kindError{kind: sandbox.ErrUnavailable, cause: fmt.Errorf("cannot run %s: %w (install apptainer (https://apptainer.org) or set singularity.executable)", exe, err)}
	}
	return fmt.Errorf("run %s: %w", exe, err)
}

// subcommand returns the leading words of args that name the operation (for messages).
func subcommand(args []string) []string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || len(words) == 2 {
			break
		}
		words = append(words, a)
	}
	return words
}

// tail returns the last n bytes of b as one trimmed line-joined string.
func tail(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = append([]byte("…"), b[len(b)-n:]...)
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\n", " | ")), " ")
}

// logWriter sends a helper's stderr to the logger line by line and keeps the last lines, so
// a helper that fails to start can say why.
type logWriter struct {
	log *slog.Logger

	mu   sync.Mutex
	buf  []byte
	last []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	w.last = append(w.last, p...)
	if len(w.last) > 4096 {
		w.last = w.last[len(w.last)-4096:]
	}
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.Debug("helper stderr", "line", string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 4096 {
		w.log.Debug("helper stderr", "line", string(w.buf))
		w.buf = nil
	}
	return len(p), nil
}

// Tail is the end of what was written.
func (w *logWriter) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return tail(w.last, 600)
}
