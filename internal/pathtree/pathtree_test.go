package pathtree

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		p, dir string
		want   bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false}, // a sibling that shares the prefix
		{"/a", "/a/b", false},
		{"/anything", "/", true},
	} {
		if got := Within(tc.p, tc.dir); got != tc.want {
			t.Errorf("Within(%q, %q) = %v; want %v", tc.p, tc.dir, got, tc.want)
		}
	}
}

func TestClean(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	got := Clean([]string{"", "relative", link + "/", dir + "/missing/../missing2"})
	want := []string{real, dir + "/missing2"}
	if !slices.Equal(got, want) {
		t.Errorf("Clean = %q; want %q (relative and empty dropped, links resolved, missing paths cleaned)", got, want)
	}
}
