package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// mapErr turns a client-go or helper failure into a sandbox.Error with the sentinel callers
// test for, keeping the API server's own message.
func (b *Backend) mapErr(op, id string, err error) error {
	return sandbox.Wrap(Name, op, id, err, b.classify)
}

func (b *Backend) classify(err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), sandbox.HasKind(err):
		return err
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the cluster rejected the credentials (%s); check the kubeconfig's user (%s): %w", apiMessage(err), b.source(), sandbox.ErrDenied)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s; `hermes-sandbox doctor` lists the permissions the backend needs: %w", apiMessage(err), sandbox.ErrDenied)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %w", apiMessage(err), sandbox.ErrNotFound)
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err):
		return fmt.Errorf("%s: %w", apiMessage(err), sandbox.ErrUnavailable)
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &ne) || errors.As(err, &oe) || strings.Contains(err.Error(), "connection refused") {
		return fmt.Errorf("cannot reach the cluster at %s: %v: %w", b.server(), err, sandbox.ErrUnavailable)
	}
	return err
}

// admissionErr explains an object the API server refused, with its own message and a fix.
func (b *Backend) admissionErr(op, id string, err error) error {
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		return b.mapErr(op, id, err)
	}
	msg := apiMessage(err)
	fix := ""
	switch {
	case strings.Contains(msg, "violates PodSecurity"):
		fix = "the namespace's Pod Security level refuses the pod; hermes pods meet \"restricted\", so " +
			"check kubernetes.image and kubernetes.run_as_user, or the namespace's " +
			"pod-security.kubernetes.io labels"
	case strings.Contains(msg, "exceeded quota") || strings.Contains(msg, "must specify limits") || strings.Contains(msg, "must specify requests"):
		fix = "a ResourceQuota in the namespace refuses it; set kubernetes.cpu and kubernetes.memory within the quota (kubectl describe resourcequota), or raise the quota"
	case strings.Contains(msg, "RuntimeClass") || strings.Contains(msg, "runtimeClassName"):
		fix = "check kubernetes.runtime_class against `kubectl get runtimeclass`"
	case strings.Contains(msg, "LimitRange") || strings.Contains(msg, "maximum") || strings.Contains(msg, "minimum"):
		fix = "a LimitRange in the namespace refuses the resources; adjust kubernetes.cpu, kubernetes.memory or kubernetes.ephemeral_storage"
	case apierrors.IsForbidden(err):
		fix = "the credentials may not do this; `hermes-sandbox doctor` names the missing permission"
	}
	e := fmt.Errorf("the cluster refused it: %s", msg)
	if fix != "" {
		e = fmt.Errorf("%w; fix: %s", e, fix)
	}
	sentinel := sandbox.ErrInvalidConfig // a setting (or the namespace's policy) to change
	if strings.HasPrefix(fix, "the credentials") {
		sentinel = sandbox.ErrDenied
	}
	return &sandbox.Error{Backend: Name, Op: op, ID: id, Err: fmt.Errorf("%w: %w", e, sentinel)}
}

// apiMessage is the API server's own message for err.
func apiMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Message != "" {
		return se.Status().Message
	}
	return err.Error()
}

func (b *Backend) source() string {
	if b.conn != nil {
		return b.conn.source
	}
	return "no kubeconfig"
}

func (b *Backend) server() string {
	if b.conn != nil {
		return b.conn.server
	}
	return "?"
}
