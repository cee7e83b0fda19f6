//go:build !linux

package nsbox

import (
	"context"
	"errors"
	"net"
	"runtime"
)

// ErrNotRunning: no init of the session runs (Stop).
var ErrNotRunning = errors.New("nsbox: the session's namespaces are not running")

var errLinuxOnly = errors.New("nsbox: namespaces are Linux-only (this is " + runtime.GOOS + ")")

// Serve is Linux-only.
func Serve(ctx context.Context, spec Spec, h Helper) (net.Conn, Report, error) {
	return nil, Report{}, errLinuxOnly
}

// Relay is Linux-only.
func Relay(ctx context.Context, spec Spec) (net.Conn, error) { return nil, errLinuxOnly }

// Stop has nothing to stop off Linux.
func Stop(sockDir, session string) error { return nil }

// Probe reports that namespaces are Linux-only.
func Probe(network Network) error { return errLinuxOnly }
