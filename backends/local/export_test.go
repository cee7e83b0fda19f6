//go:build !windows

package local

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// CanClone reports whether dir's filesystem clones files (FICLONE), by trying it.
func CanClone(t *testing.T, dir string) bool {
	t.Helper()
	src, err := os.CreateTemp(dir, "clone-probe-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(src.Name())
	defer src.Close()
	if _, err := src.WriteString("probe"); err != nil {
		t.Fatal(err)
	}
	dstPath := filepath.Join(dir, filepath.Base(src.Name())+".clone")
	dst, err := os.Create(dstPath)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dstPath)
	defer dst.Close()
	err = cloneFile(dst, src)
	if err != nil && !errors.Is(err, errNoClone) {
		t.Fatalf("clone probe: %v", err)
	}
	return err == nil
}
