package vercel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// hinted adds what to do next to an error, keeping it matchable with errors.Is and As.
func hinted(err error, hint string) error { return fmt.Errorf("%w: %s", err, hint) }

// apiErr maps a client failure to the sandbox sentinels, once, here: HTTP statuses by
// number, network failures by type.
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
	var ae *APIError
	var ne net.Error
	var ue *url.Error
	switch {
	case errors.As(err, &ae):
		switch {
		case ae.Status == http.StatusNotFound:
			err = sandbox.WithKind(sandbox.ErrNotFound, ae)
		case ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden:
			err = sandbox.WithKind(sandbox.ErrDenied, hinted(ae, fmt.Sprintf("the %s credentials were refused for team %s, project %s: check VERCEL_TOKEN / VERCEL_OIDC_TOKEN, vercel.team_id and vercel.project_id (hermes-sandbox doctor)",
				b.creds.kind, b.creds.teamID, b.creds.project)))
		case ae.Status == http.StatusTooManyRequests:
			err = sandbox.WithKind(sandbox.ErrUnavailable, hinted(ae, "rate limited by Vercel; try again later"))
		case ae.Status >= 500:
			err = sandbox.WithKind(sandbox.ErrUnavailable, hinted(ae, "the Vercel API failed; try again (hermes-sandbox doctor)"))
		case ae.Status == http.StatusGone || (ae.Status == http.StatusUnprocessableEntity && (ae.Code == "sandbox_stopping" || ae.Code == "sandbox_snapshotting")):
			// The VM session stopped, is stopping or is being snapshotted (sandbox.ts reads
			// these codes the same way): the sandbox resumes on the next start.
			err = sandbox.WithKind(sandbox.ErrUnavailable, hinted(ae, "the sandbox's VM session is not running; the next command resumes it"))
		case ae.Status == http.StatusBadRequest || ae.Status == http.StatusUnprocessableEntity:
			err = sandbox.WithKind(sandbox.ErrInvalidConfig, ae)
		}
	case errors.As(err, &ne), errors.As(err, &ue):
		err = sandbox.WithKind(sandbox.ErrUnavailable, hinted(err, "cannot reach the Vercel API at "+b.api.base.String()+": check the network or vercel.api_url (hermes-sandbox doctor)"))
	}
	return &sandbox.Error{Backend: Name, Op: op, ID: id, Err: err}
}

func isNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

func isConflict(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusConflict
}
