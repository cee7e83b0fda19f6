package sandbox

import (
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

type kindError struct {
	kind  error
	cause error
}

func (e *kindError) Error() string   { return e.cause.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.cause} }
