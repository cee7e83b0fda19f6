//go:build !unix && !windows

package audit

import (
	"fmt"
	"os"
	"runtime"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// lockFile is not implemented here: without a cross-process lock, appends
// from several processes could interleave, so refuse instead.
func lockFile(f *os.File, exclusive bool) error {
	return fmt.Errorf("flock %s on %s: %w", f.Name(), runtime.GOOS, sandbox.ErrUnsupported)
}

func unlockFile(f *os.File) error { return nil }

func tryLockFile(f *os.File) (bool, error) { return false, lockFile(f, true) }
