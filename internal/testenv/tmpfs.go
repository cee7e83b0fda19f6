//go:build linux

package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs of the given size (e.g. "64k") on a new temporary directory and
// unmounts it when the test ends. It skips the test (see Missing) where mounting is not
// permitted.
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0700"); err != nil {
		Missing(t, "tmpfs", "cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): "+err.Error())
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
