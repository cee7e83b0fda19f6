package vercel

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// apiErr maps a client failure to the sandbox sentinels, once, here: HTTP statuses by
// number, network failures by type.
func (b *Backend) apiErr(op, id string, err error) error {
	return sandbox.Wrap(Name, op, id, err, b.classify)
}

func (b *Backend) classify(err error) error {
	var ae *APIError
	var ne net.Error
	var ue *url.Error
	switch {
	case errors.As(err, &ae):
		switch {
		case ae.Status == http.StatusNotFound:
			return sandbox.WithKind(sandbox.ErrNotFound, ae)
		case ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden:
			return sandbox.WithHint(sandbox.ErrDenied, ae, fmt.Sprintf("the %s credentials were refused for team %s, project %s: check VERCEL_TOKEN / "+
				"VERCEL_OIDC_TOKEN, vercel.team_id and vercel.project_id (hermes-sandbox doctor)",
				b.creds.kind, b.creds.teamID, b.creds.project))
		case ae.Status == http.StatusTooManyRequests:
			return sandbox.WithHint(sandbox.ErrUnavailable, ae, "rate limited by Vercel; try again later")
		case ae.Status >= 500:
			return sandbox.WithHint(sandbox.ErrUnavailable, ae, "the Vercel API failed; try again (hermes-sandbox doctor)")
		case ae.Status == http.StatusGone || (ae.Status == http.StatusUnprocessableEntity && (ae.Code == "sandbox_stopping" || ae.Code == "sandbox_snapshotting")):
			// The VM session stopped, is stopping or is being snapshotted (sandbox.ts reads
			// these codes the same way): the sandbox resumes on the next start.
			return sandbox.WithHint(sandbox.ErrUnavailable, ae, "the sandbox's VM session is not running; the next command resumes it")
		case ae.Status == http.StatusBadRequest || ae.Status == http.StatusUnprocessableEntity:
			return sandbox.WithKind(sandbox.ErrInvalidConfig, ae)
		}
	case errors.As(err, &ne), errors.As(err, &ue):
		return sandbox.WithHint(sandbox.ErrUnavailable, err, "cannot reach the Vercel API at "+b.api.base.String()+": check the network or vercel.api_url (hermes-sandbox doctor)")
	}
	return err
}

func isNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

func isConflict(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusConflict
}
