package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestWriteFileAtomicConcurrent: writers racing on one file each leave it whole (one of
// their contents, never a mix or a truncation), and no temporary file is left behind.
func TestWriteFileAtomicConcurrent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "record.json")
	contents := make([][]byte, 16)
	for i := range contents {
		contents[i] = bytes.Repeat([]byte{byte('a' + i)}, 64<<10+i)
	}
	var wg sync.WaitGroup
	for round := 0; round < 20; round++ {
		for _, c := range contents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := WriteFileAtomic(p, c); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		whole := false
		for _, c := range contents {
			whole = whole || bytes.Equal(got, c)
		}
		if !whole {
			t.Fatalf("after concurrent writes the file is %d bytes that match no writer", len(got))
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, %v; want 0600", fi.Mode(), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("left in the directory: %d entries; want only the file", len(ents))
	}
}
