//go:build !windows

package singularity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// wrap gives err the backend's shape, "singularity: OP ID: cause", once.
func wrap(op, id string, err error) error { return sandbox.Wrap(Name, op, id, err, nil) }

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
		return sandbox.WithKind(sandbox.ErrUnavailable, fmt.Errorf("cannot run %s: %w (install apptainer (https://apptainer.org) or set singularity.executable)", exe, err))
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
