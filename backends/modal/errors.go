package modal

import (
	"context"
	"errors"
	"fmt"

	modalsdk "github.com/modal-labs/modal-client/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// codeOf returns the gRPC code of err, or OK when it carries none.
func codeOf(err error) codes.Code {
	if st, ok := status.FromError(err); ok {
		return st.Code()
	}
	return codes.OK
}

// mapErr turns an SDK or gRPC failure into a sandbox.Error with a sentinel and advice. It is
// the one place Modal errors are classified.
func (b *Backend) mapErr(op, id string, err error) error {
	return sandbox.Wrap(Name, op, id, err, b.classify)
}

// explained is a Modal failure with a sentence saying what to do first; errors.Is matches
// both the sentinel (kind) and the original error.
func explained(msg string, kind, cause error) error {
	return sandbox.WithKind(kind, fmt.Errorf("%s: %w", msg, cause))
}

func (b *Backend) classify(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var (
		notFound  modalsdk.NotFoundError
		invalid   modalsdk.InvalidError
		exhausted modalsdk.ResourceExhaustedError
		conflict  modalsdk.ConflictError
		exists    modalsdk.AlreadyExistsError
	)
	switch {
	case errors.As(err, &exhausted) || codeOf(err) == codes.ResourceExhausted:
		what := "Modal has no capacity for this sandbox or your workspace reached a quota"
		if b.cfg.GPU != "" {
			what = fmt.Sprintf("Modal cannot schedule GPU %q now (no capacity or over quota)", b.cfg.GPU)
		}
		return explained(what+": retry later, pick another GPU type (hermes-sandbox config set modal.gpu T4) or check your limits at modal.com", sandbox.ErrUnavailable, err)
	case codeOf(err) == codes.Unauthenticated || codeOf(err) == codes.PermissionDenied:
		return explained(fmt.Sprintf("Modal rejected the token from %s: create a new one (`modal token new`) and store it with `hermes-sandbox setup modal`", b.creds.Source), sandbox.ErrInvalidConfig, err)
	case errors.As(err, &notFound) || codeOf(err) == codes.NotFound:
		return explained("not found on Modal", sandbox.ErrNotFound, err)
	case errors.As(err, &invalid) || codeOf(err) == codes.InvalidArgument:
		return explained("Modal refused the request", sandbox.ErrInvalidConfig, err)
	case errors.As(err, &conflict) || codeOf(err) == codes.FailedPrecondition:
		return explained("the sandbox has already finished", sandbox.ErrNotFound, err)
	case errors.As(err, &exists) || codeOf(err) == codes.AlreadyExists:
		return explained("a sandbox with this name already exists", sandbox.ErrUnavailable, err)
	case codeOf(err) == codes.Unavailable || codeOf(err) == codes.DeadlineExceeded:
		return explained(fmt.Sprintf("cannot reach Modal at %s: check the network (hermes-sandbox doctor)", b.creds.ServerURL), sandbox.ErrUnavailable, err)
	}
	return err
}

// gone reports whether err says the sandbox no longer runs (terminated, timed out, unknown).
func gone(err error) bool {
	var notFound modalsdk.NotFoundError
	var conflict modalsdk.ConflictError
	switch codeOf(err) {
	case codes.NotFound, codes.FailedPrecondition:
		return true
	}
	return errors.As(err, &notFound) || errors.As(err, &conflict)
}
