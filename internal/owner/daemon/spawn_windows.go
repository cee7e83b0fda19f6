package daemon

import (
	"errors"
	"fmt"
	"time"
)

// Start starts no owner on Windows (owner.Supported is false there): every exec runs in its
// own process.
func Start(sock, exe string, args, environ []string, logPath string, timeout time.Duration) error {
	return fmt.Errorf("owner: session owners need Linux (their callers are verified through /proc): %w", errors.ErrUnsupported)
}

// Ready does nothing on Windows, where Start starts nothing.
func Ready(err error) {}
