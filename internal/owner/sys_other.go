//go:build !linux

package owner

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/term"
)

// Supported reports whether session owners run on this system: not here. An owner checks
// every caller against the calling process itself through SO_PEERCRED and /proc (see
// VerifyPeer on Linux); macOS (LOCAL_PEERCRED gives the uid, not the process's binary,
// directory and environment) and Windows have no equivalent, so every exec runs in its own
// process and keeps its warm channel only for its own lifetime.
const Supported = false

// errUnsupported is why nothing here reaches an owner.
var errUnsupported = fmt.Errorf("owner: session owners run on Linux only (callers are verified through /proc): %w",
	errors.ErrUnsupported)

// Sockaddr returns p, which must fit a sockaddr_un: there is no /proc/self/fd to reach a
// longer one through.
func Sockaddr(p string) (string, func(), error) {
	if len(p) >= 100 {
		return "", nil, fmt.Errorf("owner: socket path %s is too long for a unix socket", p)
	}
	return p, func() {}, nil
}

// Dial reaches no owner here (see Supported).
func Dial(path string) (*os.File, error) {
	return nil, &os.PathError{Op: "connect", Path: path, Err: errUnsupported}
}

// IsTerminal reports whether fd is a terminal.
func IsTerminal(fd int) bool { return term.IsTerminal(fd) }
