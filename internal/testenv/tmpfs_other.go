//go:build !linux

package testenv

import "testing"

// Tmpfs skips the test (see Missing): tmpfs mounts are made on Linux only.
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	Missing(t, "tmpfs", "a tmpfs mount of "+size+" is made on Linux only")
	return ""
}
