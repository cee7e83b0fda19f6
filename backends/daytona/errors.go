package daytona

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// kindError is a Daytona error that also matches a sandbox sentinel.
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

// apiErr maps a control-plane or toolbox failure to the sandbox sentinels, once, here, by
// HTTP status: a rejected key says where the key came from, a quota says so, no answer is
// ErrUnavailable.
func (b *Backend) apiErr(op, id string, err error) error {
	if err == nil {
		return nil
	}
	var se *sandbox.Error
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &sandbox.Error{Backend: Name, Op: op, ID: id, Err: err}
	}
	var ke *kindError
	switch st := statusOf(err); {
	case errors.As(err, &ke):
	case st == http.StatusUnauthorized:
		err = &kindError{kind: sandbox.ErrDenied, cause: err, hint: fmt.Sprintf(
			"Daytona rejected the API key %s: create one at https://app.daytona.io/dashboard/keys and store it (hermes-sandbox setup daytona)%s",
			b.keySource, b.orgHint())}
	case st == http.StatusForbidden:
		err = &kindError{kind: sandbox.ErrDenied, cause: err, hint: fmt.Sprintf(
			"Daytona refused this with the API key %s: the key lacks the permission (sandboxes:write), or the organisation's quota is used up (hermes-sandbox gc; lower daytona.cpu/memory/disk)%s",
			b.keySource, b.orgHint())}
	case st == http.StatusPaymentRequired || st == http.StatusTooManyRequests:
		err = &kindError{kind: sandbox.ErrUnavailable, cause: err, hint: "the organisation's quota or rate limit is reached: stop or delete sandboxes you no longer need (hermes-sandbox gc), or lower daytona.cpu/memory/disk"}
	case st == http.StatusNotFound:
		err = &kindError{kind: sandbox.ErrNotFound, cause: err}
	case st == http.StatusRequestTimeout:
		err = &kindError{kind: sandbox.ErrTimeout, cause: err, hint: "the toolbox gave up on the command (its output is lost)"}
	case st == http.StatusBadRequest:
		err = &kindError{kind: sandbox.ErrInvalidConfig, cause: err, hint: "check the daytona section (hermes-sandbox config list daytona)"}
	case isNetErr(err):
		err = &kindError{kind: sandbox.ErrUnavailable, cause: err, hint: fmt.Sprintf("is %s reachable? (daytona.api_url, hermes-sandbox doctor)", b.apiURL)}
	case st/100 == 5:
		err = &kindError{kind: sandbox.ErrUnavailable, cause: err}
	}
	return &sandbox.Error{Backend: Name, Op: op, ID: id, Err: err}
}

func (b *Backend) orgHint() string {
	if b.cfg.OrganizationID == "" {
		return "; a JWT also needs daytona.organization_id"
	}
	return ""
}
