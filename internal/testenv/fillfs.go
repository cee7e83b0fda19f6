package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// FillFS writes a file in dir until the file system is full, so the next write that needs a
// new block fails with ENOSPC.
func FillFS(t testing.TB, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for len(chunk) > 0 {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			chunk = chunk[:len(chunk)/2]
		}
	}
}
