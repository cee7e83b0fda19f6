package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// unreachableError is why the engine does not answer; wrapped in a sandbox.Error whose
// operation names the engine, it reads "docker: cannot reach the engine at HOST: is the
// daemon running? (hermes-sandbox doctor)".
type unreachableError struct {
	perm  bool
	cause error
}

func (e *unreachableError) Error() string {
	if e.perm {
		return "permission denied: add your user to the docker group, or set docker.host (hermes-sandbox doctor)"
	}
	return "is the daemon running? (hermes-sandbox doctor)"
}

func (e *unreachableError) Unwrap() []error { return []error{sandbox.ErrUnavailable, e.cause} }

func (b *Backend) unreachableErr(err error) error {
	return &sandbox.Error{Backend: Name, Op: "cannot reach the engine at " + b.host,
		Err: &unreachableError{perm: errors.Is(err, os.ErrPermission), cause: err}}
}

// engineErr maps an Engine API error to the sandbox sentinels with typed checks, once, here.
func (b *Backend) engineErr(op, id string, err error) error {
	if err == nil {
		return nil
	}
	var ue *unreachableError
	if errors.As(err, &ue) {
		return err
	}
	if unreachable(err) {
		return b.unreachableErr(err)
	}
	var kind error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		kind = nil // already a sentinel callers test for
	case cerrdefs.IsNotFound(err):
		kind = sandbox.ErrNotFound
	case cerrdefs.IsInvalidArgument(err):
		kind = sandbox.ErrInvalidConfig
	case cerrdefs.IsPermissionDenied(err), cerrdefs.IsUnauthorized(err):
		kind = sandbox.ErrDenied
	case cerrdefs.IsUnavailable(err):
		kind = sandbox.ErrUnavailable
	}
	if kind != nil {
		err = sandbox.WithKind(kind, err)
	}
	return &sandbox.Error{Backend: Name, Op: op, ID: id, Err: err}
}

// unreachable reports whether err means the engine could not be connected to at all.
func unreachable(err error) bool {
	if client.IsErrConnectionFailed(err) {
		return true
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// imageMissing is the error for an image the engine does not have: it names the ways to get
// one, the one that needs no registry first.
func (b *Backend) imageMissing(ctx context.Context, cause error) error {
	img := b.image()
	if _, err := b.cli.ImageInspect(ctx, img); err == nil || !cerrdefs.IsNotFound(err) {
		return b.engineErr("create", "", cause)
	}
	if b.defaultImage() {
		return &sandbox.Error{Backend: Name, Op: "image", ID: img, Err: sandbox.WithKind(sandbox.ErrNotFound,
			fmt.Errorf("docker.image is unset and neither its default %s nor %s (the image `make run` builds) is on "+
				"this machine: build %s from Debian's packages, no registry needed, with `%s` (or `make run`), and it "+
				"is used from then on; or, where a registry is reachable, `hermes-sandbox image pull %s`; or choose "+
				"an image the engine has with `hermes-sandbox config set docker.image IMAGE` (`hermes-sandbox image list`)",
				img, b.builtImage(), b.builtImage(), config.BuildDockerImage, img))}
	}
	return &sandbox.Error{Backend: Name, Op: "image", ID: img, Err: sandbox.WithKind(sandbox.ErrNotFound,
		fmt.Errorf("the image is not on this machine: build one from Debian's packages, no registry needed, with "+
			"`%s` and choose it with `hermes-sandbox config set docker.image %s`; or import a root "+
			"filesystem with `hermes-sandbox image import --rootfs DIR --tag %s` (or --tar FILE); or, where a "+
			"registry is reachable, pull it with `hermes-sandbox image pull %s`",
			config.BuildDockerImage, b.builtImage(), img, img))}
}
