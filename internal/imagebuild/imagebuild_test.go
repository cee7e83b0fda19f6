package imagebuild

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDebootstrap records its arguments and lays out a tiny root filesystem with a symlink,
// a hard link and an apt cache that must not reach the image.
const fakeDebootstrap = `#!/bin/sh
echo "$@" >> "$ARGS_LOG"
echo "I: Retrieving Release"
for last; do :; done
eval root=\${$(($#-1))}
mkdir -p "$root/bin" "$root/var/cache/apt/archives" "$root/etc"
echo hi > "$root/bin/python3"; chmod 755 "$root/bin/python3"
ln "$root/bin/python3" "$root/bin/python3.11"
ln -s python3 "$root/bin/python"
echo junk > "$root/var/cache/apt/archives/x.deb"
echo "I: Base system installed successfully."
`

func TestBuildCachesAndTars(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: image build needs root (debootstrap); run the tests as root")
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "debootstrap")
	if err := os.WriteFile(prog, []byte(fakeDebootstrap), 0o755); err != nil {
		t.Fatal(err)
	}
	argsLog := filepath.Join(dir, "args")
	t.Setenv("ARGS_LOG", argsLog)
	var progress strings.Builder
	o := Options{Suite: "bookworm", Packages: []string{"python3", "git", "python3"}, Mirror: "http://mirror.invalid/debian",
		CacheDir: filepath.Join(dir, "cache"), Progress: &progress, Debootstrap: prog}
	path, cached, err := Build(context.Background(), o)
	if err != nil || cached {
		t.Fatalf("Build = %q, cached=%v, %v", path, cached, err)
	}
	args, _ := os.ReadFile(argsLog)
	if got := strings.TrimSpace(string(args)); !strings.HasPrefix(got, "--variant=minbase --include=git,python3 bookworm ") ||
		!strings.HasSuffix(got, " http://mirror.invalid/debian") {
		t.Errorf("debootstrap args = %q", got)
	}
	if !strings.Contains(progress.String(), "Base system installed") {
		t.Errorf("progress was not shown: %q", progress.String())
	}
	entries := tarEntries(t, path)
	if entries["bin/python3"] != tar.TypeReg || entries["bin/python"] != tar.TypeSymlink || entries["bin/python3.11"] != tar.TypeLink ||
		entries["workspace/"] != tar.TypeDir {
		t.Errorf("tar entries = %v", entries)
	}
	if _, ok := entries["var/cache/apt/archives/x.deb"]; ok {
		t.Error("the apt cache went into the image")
	}
	// The same image again comes from the cache without running debootstrap.
	if err := os.Remove(argsLog); err != nil {
		t.Fatal(err)
	}
	again, cached, err := Build(context.Background(), o)
	if err != nil || !cached || again != path {
		t.Fatalf("second Build = %q, cached=%v, %v; want the cached %q", again, cached, err, path)
	}
	if _, err := os.Stat(argsLog); !errors.Is(err, os.ErrNotExist) {
		t.Error("debootstrap ran again for a cached image")
	}
	// Other packages are another image.
	o.Packages = []string{"curl"}
	if other, cached, err := Build(context.Background(), o); err != nil || cached || other == path {
		t.Fatalf("Build with other packages = %q, cached=%v, %v", other, cached, err)
	}
}

func TestBuildErrors(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{}, "no Debian suite"},
		{Options{Suite: "bookworm", Packages: []string{"python3,git"}}, "invalid package name"},
		{Options{Suite: "bookworm", Packages: []string{"--force"}}, "invalid package name"},
		{Options{Suite: "bookworm", Debootstrap: "/nonexistent/debootstrap"}, "apt-get install debootstrap"},
	} {
		if _, _, err := Build(context.Background(), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Build(%+v) = %v; want an error containing %q", c.o, err, c.want)
		}
	}
}

func TestMirrorIn(t *testing.T) {
	dir := t.TempDir()
	deb822 := filepath.Join(dir, "debian.sources")
	os.WriteFile(deb822, []byte("Types: deb\nURIs: http://example.org/debian-security\nSuites: x\n\nTypes: deb\nURIs: http://mirror.example/debian/\n"), 0o644)
	if got := mirrorIn(deb822, true); got != "http://mirror.example/debian" {
		t.Errorf("deb822 mirror = %q", got)
	}
	list := filepath.Join(dir, "sources.list")
	os.WriteFile(list, []byte("# x\ndeb [arch=amd64] http://ftp.example/debian bookworm main\n"), 0o644)
	if got := mirrorIn(list, false); got != "http://ftp.example/debian" {
		t.Errorf("one-line mirror = %q", got)
	}
}

func tarEntries(t *testing.T, path string) map[string]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h.Typeflag
	}
}
