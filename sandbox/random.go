package sandbox

import (
	"crypto/rand"
	"encoding/hex"
)

// RandomHex returns n random bytes as 2n hex digits, for names that must not collide (a
// command's files in a sandbox, a temporary upload, a container).
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
