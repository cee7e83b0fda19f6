package agentbin

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
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

// A release CLI's embedded helper is written once into the cache, under a name holding its
// SHA-256, as a static executable; a second lookup uses that file without writing it again,
// and a helper that is not what it says (another architecture, a truncated copy) leaves
// nothing behind.
func TestEmbeddedHelperExtracted(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("skipping: the helper is a linux binary")
	}
	bin := filepath.Join(t.TempDir(), "sandbox-agent")
	build := exec.Command("go", "build", "-o", bin, "github.com/hermes-sandbox/hermes-sandbox/cmd/sandbox-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the helper: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cache")
	p, err := extract(data, runtime.GOARCH, dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if err != nil || !bytes.Equal(got, data) || fi.Mode().Perm() != 0o755 || !strings.HasPrefix(filepath.Base(p), "sandbox-agent-linux-"+runtime.GOARCH+"-") {
		t.Fatalf("extracted %s (mode %v, err %v, same content %v)", p, fi.Mode(), err, bytes.Equal(got, data))
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	os.Chtimes(p, old, old)
	if p2, err := extract(data, runtime.GOARCH, dir); err != nil || p2 != p {
		t.Fatalf("second extract = %q, %v; want %q", p2, err, p)
	}
	if fi, _ := os.Stat(p); !fi.ModTime().Equal(old) {
		t.Errorf("the second lookup wrote the helper again")
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	for name, bad := range map[string]struct {
		data []byte
		arch string
	}{"other architecture": {data, other}, "truncated": {data[:len(data)/2], runtime.GOARCH}} {
		if p, err := extract(bad.data, bad.arch, dir); err == nil {
			t.Errorf("%s: extract = %q; want an error", name, p)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("cache holds %v; want only the good helper", names)
	}
}
