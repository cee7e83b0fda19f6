package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A binary is built once per process, and RemoveBuilt deletes it; a dead process's
// directory is swept, a live one's kept.
func TestBuildBinaryOnceAndRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: builds a binary")
	}
	dead := filepath.Join(os.TempDir(), builtPrefix+"999999999-x")
	live := filepath.Join(os.TempDir(), builtPrefix+strconv.Itoa(os.Getppid())+"-x")
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(live); os.RemoveAll(dead) })
	RemoveBuilt()
	p := BuildBinary(t, "./cmd/sandbox-agent")
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("BuildBinary = %s: %v", p, err)
	}
	if again := BuildBinary(t, "./cmd/sandbox-agent"); again != p {
		t.Errorf("second BuildBinary = %s; want the same %s", again, p)
	}
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("%s of a dead process was not swept", dead)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("%s of a live process was swept: %v", live, err)
	}
	RemoveBuilt()
	if _, err := os.Stat(filepath.Dir(p)); err == nil {
		t.Errorf("RemoveBuilt left %s", filepath.Dir(p))
	}
}
