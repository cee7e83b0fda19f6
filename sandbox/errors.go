package sandbox

import (
	"context"
	"errors"
)

// Sentinel errors shared by all backends. Backends wrap them, so callers test with errors.Is.
var (
	ErrNotFound      = errors.New("not found")
	ErrClosed        = errors.New("closed")
	ErrTimeout       = errors.New("timed out")
	ErrDenied        = errors.New("denied")
	ErrUnsupported   = errors.New("not supported by this backend")
	ErrInvalidConfig = errors.New("invalid configuration")
	ErrUnavailable   = errors.New("backend unavailable")
	// ErrLimit: a configured limit (terminal.max_jobs, mcp.max_sessions) was reached.
	ErrLimit = errors.New("limit reached")
)

// Error is a detailed error shaped like os.PathError: "docker: exec 3f2a…: cause".
type Error struct {
	Backend string
	Op      string
	ID      string
	Err     error
}

func (e *Error) Error() string {
	s := e.Backend + ": " + e.Op
	if e.ID != "" {
		s += " " + e.ID
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// WithKind returns cause, also matching the sentinel kind with errors.Is: the message stays
// cause's own. Backends use it to map a typed failure of their engine to a sentinel once.
func WithKind(kind, cause error) error { return &kindError{kind: kind, cause: cause} }

// WithHint is WithKind with a sentence saying what to do next after cause's message.
func WithHint(kind, cause error, hint string) error {
	return &kindError{kind: kind, cause: cause, hint: hint}
}

type kindError struct {
	kind  error
	cause error
	hint  string
}

func (e *kindError) Error() string {
	if e.hint == "" {
		return e.cause.Error()
	}
	return e.cause.Error() + ": " + e.hint
}

func (e *kindError) Unwrap() []error { return []error{e.kind, e.cause} }

// HasKind reports whether err already matches one of the sentinels a backend maps its
// provider's failures to, so it needs no classifying again.
func HasKind(err error) bool {
	for _, kind := range []error{ErrNotFound, ErrTimeout, ErrDenied, ErrInvalidConfig, ErrUnavailable} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

// Wrap gives err a backend's shape, "backend: op id: cause", once: nil stays nil and an
// *Error of that backend is returned as it is. Any other error but a context's
// cancellation or deadline goes through classify first (when not nil), the one place a
// backend maps its provider's failures to the sentinels.
func Wrap(backend, op, id string, err error, classify func(error) error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) && se.Backend == backend {
		return err
	}
	if classify != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		err = classify(err)
	}
	return &Error{Backend: backend, Op: op, ID: id, Err: err}
}
