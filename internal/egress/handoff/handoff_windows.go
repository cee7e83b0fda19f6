package handoff

import (
	"errors"
	"fmt"
	"net"
)

// errUnsupported says why nothing is handed over on Windows: a unix socket there carries no
// descriptors (no SCM_RIGHTS). Only a Linux sandbox's relay hands connections over, to a
// proxy beside a local or docker session on Linux.
var errUnsupported = fmt.Errorf("handoff: passing connections over a unix socket needs SCM_RIGHTS, "+
	"which Windows lacks: %w", errors.ErrUnsupported)

// Send is unsupported on Windows (see errUnsupported).
func Send(uc *net.UnixConn, c *net.TCPConn) error { return errUnsupported }

// Receive is unsupported on Windows (see errUnsupported).
func Receive(uc *net.UnixConn, serve func(net.Conn), reject func(error)) error { return errUnsupported }
