//go:build !unix && !windows

package flock

import (
	"context"
	"fmt"
	"runtime"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Lock is not implemented here: without a cross-process lock, concurrent updates could be
// lost, so it refuses instead.
func Lock(path string) (func(), error) {
	return nil, fmt.Errorf("lock %s on %s: %w", path, runtime.GOOS, sandbox.ErrUnsupported)
}

// LockContext refuses like Lock.
func LockContext(_ context.Context, path string) (func(), error) { return Lock(path) }
