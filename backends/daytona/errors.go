package daytona

import (
	"fmt"
	"net/http"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// apiErr maps a control-plane or toolbox failure to the sandbox sentinels, once, here, by
// HTTP status: a rejected key says where the key came from, a quota says so, no answer is
// ErrUnavailable.
func (b *Backend) apiErr(op, id string, err error) error {
	return sandbox.Wrap(Name, op, id, err, b.classify)
}

func (b *Backend) classify(err error) error {
	switch st := statusOf(err); {
	case sandbox.HasKind(err):
	case st == http.StatusUnauthorized:
		err = sandbox.WithHint(sandbox.ErrDenied, err, fmt.Sprintf(
			"Daytona rejected the API key %s: create one at https://app.daytona.io/dashboard/keys and store it (hermes-sandbox setup daytona)%s",
			b.keySource, b.orgHint()))
	case st == http.StatusForbidden:
		err = sandbox.WithHint(sandbox.ErrDenied, err, fmt.Sprintf(
			"Daytona refused this with the API key %s: the key lacks the permission (sandboxes:write), or the organisation's quota is used up (hermes-sandbox gc; lower daytona.cpu/memory/disk)%s",
			b.keySource, b.orgHint()))
	case st == http.StatusPaymentRequired || st == http.StatusTooManyRequests:
		err = sandbox.WithHint(sandbox.ErrUnavailable, err, "the organisation's quota or rate limit is reached: stop or delete sandboxes you no longer "+
			"need (hermes-sandbox gc), or lower daytona.cpu/memory/disk")
	case st == http.StatusNotFound:
		err = sandbox.WithKind(sandbox.ErrNotFound, err)
	case st == http.StatusRequestTimeout:
		err = sandbox.WithHint(sandbox.ErrTimeout, err, "the toolbox gave up on the command (its output is lost)")
	case st == http.StatusBadRequest:
		err = sandbox.WithHint(sandbox.ErrInvalidConfig, err, "check the daytona section (hermes-sandbox config list daytona)")
	case isNetErr(err):
		err = sandbox.WithHint(sandbox.ErrUnavailable, err, fmt.Sprintf("is %s reachable? (daytona.api_url, hermes-sandbox doctor)", b.apiURL))
	case st/100 == 5:
		err = sandbox.WithKind(sandbox.ErrUnavailable, err)
	}
	return err
}

func (b *Backend) orgHint() string {
	if b.cfg.OrganizationID == "" {
		return "; a JWT also needs daytona.organization_id"
	}
	return ""
}
