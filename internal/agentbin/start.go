package agentbin

import (
	"context"
	"errors"
	"fmt"
)

// Exit statuses of the backends' helper start scripts, the same everywhere.
const (
	ExitCorrupt  = 95  // an upload arrived short or damaged, and was removed
	ExitNoRaw    = 96  // stty could not put the terminal in raw mode
	ExitMissing  = 97  // the sandbox does not have the helper (yet): upload it and start again
	ExitSetup    = 98  // the helper or its directories could not be set up (a read-only or full disk)
	ExitNotExec  = 126 // the helper (or /bin/sh) is there but cannot be executed
	ExitNotFound = 127 // the helper (or /bin/sh) is not there
	exitUnknown  = -1
)

// Explain says in a few words what a start script's exit status means.
func Explain(code int) string {
	switch code {
	case ExitCorrupt:
		return "the uploaded helper was short or corrupt"
	case ExitNoRaw:
		return "stty could not put the terminal in raw mode"
	case ExitMissing:
		return "the helper is not in the sandbox"
	case ExitSetup:
		return "the helper or its state directory could not be set up: is the file system read-only or full?"
	case ExitNotExec, ExitNotFound:
		return "the binary could not be run: the sandbox needs /bin/sh, and must allow executing files where the helper is"
	case exitUnknown:
		return "no exit status"
	}
	return "see the helper's log in the sandbox"
}

// StartError says the helper did not start: the start script's exit status (-1 when not
// known) and the tail of what it printed.
type StartError struct {
	Code   int
	Output string
	Err    error
}

func (e *StartError) Error() string {
	msg := "start the sandbox helper: " + e.Err.Error()
	if e.Code != exitUnknown {
		msg += fmt.Sprintf(" (exit %d: %s)", e.Code, Explain(e.Code))
	}
	if e.Output != "" {
		msg += "; it printed: " + e.Output
	}
	return msg
}

func (e *StartError) Unwrap() error { return e.Err }

// CannotRun reports that the helper cannot run in this sandbox (no /bin/sh, a noexec or
// read-only file system, a binary for another machine): trying again will not help.
func (e *StartError) CannotRun() bool {
	return e.Code == ExitSetup || e.Code == ExitNotExec || e.Code == ExitNotFound
}

// Start starts the helper with try. When the sandbox does not have it (ExitMissing) or a
// start that uploads it in-band received it damaged (ExitCorrupt), it runs install and tries
// once more. try reports a helper that did not start as a *StartError.
func Start[C any](ctx context.Context, try func(context.Context) (C, error), install func(context.Context) error) (C, error) {
	c, err := try(ctx)
	var se *StartError
	if err == nil || ctx.Err() != nil || !errors.As(err, &se) || (se.Code != ExitMissing && se.Code != ExitCorrupt) {
		return c, err
	}
	if err := install(ctx); err != nil {
		var zero C
		return zero, err
	}
	return try(ctx)
}
