package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// builtPrefix names the directories the binaries of a test process go to; the process id
// follows it, so a later process can tell a dead one's leftovers from a running one's.
const builtPrefix = "hermes-test-bin-"

var built struct {
	sync.Mutex
	dir  string            // guarded by the embedded Mutex; this process's directory
	bins map[string]*build // guarded by the embedded Mutex; by package path
}

type build struct {
	once sync.Once
	path string
	err  error
}

// BuildBinary builds the static binary of the module's package pkg ("./cmd/hermes-sandbox")
// once per test process, into a directory of the process's own that RemoveBuilt deletes, and
// returns its path. Directories left by test processes that are no longer alive (killed by a
// timeout) are swept the first time it runs.
func BuildBinary(t testing.TB, pkg string, env ...string) string {
	t.Helper()
	b, root, err := builder(pkg)
	if err != nil {
		t.Fatalf("build %s: %v", pkg, err)
	}
	b.once.Do(func() {
		// Each binary in a directory of its own: a CLI must not find a helper beside it that a
		// user's installation would not have.
		dir, err := os.MkdirTemp(root, "")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-trimpath", "-o", b.path, pkg)
		cmd.Dir = moduleRoot()
		cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = &buildError{string(out), err}
		}
	})
	if b.err != nil {
		t.Fatalf("build %s: %v", pkg, b.err)
	}
	return b.path
}

// builder returns pkg's build and the process's directory.
func builder(pkg string) (*build, string, error) {
	built.Lock()
	defer built.Unlock()
	if built.dir == "" {
		sweepBuilt()
		dir, err := os.MkdirTemp("", builtPrefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			return nil, "", err
		}
		built.dir, built.bins = dir, map[string]*build{}
	}
	b := built.bins[pkg]
	if b == nil {
		b = &build{}
		built.bins[pkg] = b
	}
	return b, built.dir, nil
}

// RemoveBuilt deletes what BuildBinary built in this process; TestMain calls it after m.Run.
func RemoveBuilt() {
	built.Lock()
	defer built.Unlock()
	if built.dir != "" {
		os.RemoveAll(built.dir)
		built.dir, built.bins = "", nil
	}
}

// sweepBuilt removes the build directories of test processes that are gone.
func sweepBuilt() {
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		if rest, ok := strings.CutPrefix(e.Name(), builtPrefix); ok && e.IsDir() && deadOwner(rest) {
			os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}
