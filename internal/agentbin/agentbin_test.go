package agentbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// A library user's program (not static, no helper beside it) finds a helper on PATH.
func TestPathFindsHelperOnPath(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("skipping: the helper is a linux binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sandbox-agent")
	build := exec.Command("go", "build", "-o", bin, "github.com/hermes-sandbox/hermes-sandbox/cmd/sandbox-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the helper: %v\n%s", err, out)
	}
	t.Setenv(EnvVar, "")
	t.Setenv("PATH", dir)
	p, args, err := find(runtime.GOARCH, "")
	if err != nil || p != bin || len(args) != 1 || args[0] != "serve" {
		t.Fatalf("Path = %q %v %v; want %s on PATH", p, args, err, bin)
	}
	t.Setenv("PATH", t.TempDir())
	if p, _, err := find(runtime.GOARCH, ""); err == nil {
		t.Fatalf("found %s with an empty PATH", p)
	}
}
