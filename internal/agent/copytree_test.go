//go:build unix

package agent

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestCopyTree: files, directories, symbolic links (kept as links, not followed), hard links,
// modes with the setgid and sticky bits and modification times reach the copy; a FIFO is
// skipped without blocking; nothing outside the source is read.
func TestCopyTree(t *testing.T) {
	from, to, outside := t.TempDir(), t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o600))
	must(os.MkdirAll(filepath.Join(from, "d/e"), 0o755))
	must(os.WriteFile(filepath.Join(from, "d/e/f"), []byte("data\x00\xff"), 0o640))
	must(os.WriteFile(filepath.Join(from, "x"), []byte("run"), 0o755))
	must(os.Link(filepath.Join(from, "x"), filepath.Join(from, "d/x-link")))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(from, "abs")))
	must(os.Symlink("../../"+filepath.Base(outside), filepath.Join(from, "d/rel")))
	must(os.Symlink(outside, filepath.Join(from, "dirlink")))
	must(syscall.Mkfifo(filepath.Join(from, "fifo"), 0o600))
	must(os.Mkdir(filepath.Join(from, "shared"), 0o755))
	must(os.Chmod(filepath.Join(from, "shared"), fs.ModeDir|fs.ModeSetgid|fs.ModeSticky|0o775))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(os.Chtimes(filepath.Join(from, "d/e/f"), old, old))
	must(os.Chtimes(filepath.Join(from, "d"), old, old))

	st, err := CopyTree(from, to)
	if err != nil {
		t.Fatalf("CopyTree() = %v", err)
	}
	if st.Files != 3 || st.Bytes != 9 || st.Skipped != 1 {
		t.Errorf("CopyTree() = %+v; want 3 files (one a hard link), 9 bytes, 1 skipped (the FIFO)", st)
	}
	if b, err := os.ReadFile(filepath.Join(to, "d/e/f")); err != nil || string(b) != "data\x00\xff" {
		t.Errorf("d/e/f in the copy = %q, %v", b, err)
	}
	for name, mode := range map[string]fs.FileMode{"d/e/f": 0o640, "x": 0o755, "shared": fs.ModeDir | fs.ModeSetgid | fs.ModeSticky | 0o775} {
		if fi, err := os.Lstat(filepath.Join(to, name)); err != nil || fi.Mode() != mode {
			t.Errorf("mode of %s in the copy = %v, %v; want %v", name, fi.Mode(), err, mode)
		}
	}
	for _, name := range []string{"d/e/f", "d"} {
		if fi, err := os.Lstat(filepath.Join(to, name)); err != nil || !fi.ModTime().Equal(old) {
			t.Errorf("modification time of %s in the copy = %v, %v; want %v", name, fi.ModTime(), err, old)
		}
	}
	a, _ := os.Lstat(filepath.Join(to, "x"))
	b, _ := os.Lstat(filepath.Join(to, "d/x-link"))
	if a == nil || b == nil || !os.SameFile(a, b) {
		t.Errorf("x and d/x-link in the copy are not one file (a hard link in the source)")
	}
	for name, target := range map[string]string{"abs": filepath.Join(outside, "secret"), "d/rel": "../../" + filepath.Base(outside), "dirlink": outside} {
		got, err := os.Readlink(filepath.Join(to, name))
		if err != nil || got != target {
			t.Errorf("%s in the copy: Readlink = %q, %v; want the link to %q itself", name, got, err, target)
		}
	}
	if _, err := os.Lstat(filepath.Join(to, "fifo")); !os.IsNotExist(err) {
		t.Errorf("the FIFO was copied (Lstat = %v); want it skipped", err)
	}
	if uid := os.Geteuid(); uid == 0 {
		must(os.Lchown(filepath.Join(from, "x"), 1234, 5678))
		to2 := t.TempDir()
		if _, err := CopyTree(from, to2); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(filepath.Join(to2, "x"))
		if s, ok := fi.Sys().(*syscall.Stat_t); err != nil || !ok || s.Uid != 1234 || s.Gid != 5678 {
			t.Errorf("owner of x in a copy made as root = %+v, %v; want 1234:5678", fi.Sys(), err)
		}
	}
}

// TestCopyTreeSwappedForLink is the race a command in a live source can run against the
// copy: a directory or a file, seen as such when listed, is a symbolic link out of the tree
// by the time it is opened. The copy must neither read what the link names nor write
// through it.
func TestCopyTreeSwappedForLink(t *testing.T) {
	from, to, outside := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	realDir, _ := os.Lstat(from)
	realFile, _ := os.Lstat(filepath.Join(outside, "secret"))
	for _, link := range []string{"d", "f"} {
		target := outside
		if link == "f" {
			target = filepath.Join(outside, "secret")
		}
		if err := os.Symlink(target, filepath.Join(from, link)); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.OpenRoot(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenRoot(to)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	c := &treeCopier{src: src, dst: dst, links: map[fileKey]string{}}
	if err := dst.Mkdir("d", 0o700); err != nil {
		t.Fatal(err)
	}
	// As dir and file are called once the entry was listed as a directory or a file.
	c.dir("d", realDir)
	c.file("f", realFile)
	if _, err := os.Stat(filepath.Join(to, "d", "secret")); !os.IsNotExist(err) {
		t.Errorf("a directory swapped for a link out of the tree: its target's file was copied (Stat = %v)", err)
	}
	if b, err := os.ReadFile(filepath.Join(to, "f")); err == nil {
		t.Errorf("a file swapped for a link out of the tree: the copy holds %q", b)
	}
}
