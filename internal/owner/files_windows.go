package owner

import (
	"io"
	"os"
)

// stdinIsDevNull is false on Windows: nothing there forwards standard input to an owner.
func stdinIsDevNull(r io.Reader) bool { return false }

// PrivateDir makes dir. Windows has no mode bits to check; a directory under the user's
// profile is private to the user by its ACL.
func PrivateDir(dir string) error { return os.MkdirAll(dir, 0o700) }
