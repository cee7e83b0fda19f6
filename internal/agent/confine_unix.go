//go:build unix

package agent

import (
	"os"
	"path/filepath"

	"github.com/hermes-sandbox/hermes-sandbox/internal/pathtree"
)

// grant is one path that commands may change, and whether it is a directory tree.
type grant struct {
	path string
	dir  bool
}

// writeGrants lists the paths under roots that commands may change so that nothing in
// protect can be: a root that holds a protected tree is not granted whole, but entry by entry,
// down the way to each protected tree. Symbolic links are skipped: the kernel judges a write by
// the place it reaches, which is granted or not on its own.
func writeGrants(roots, protect []string) []grant {
	var out []grant
	var walk func(p string, depth int)
	walk = func(p string, depth int) {
		for _, q := range protect {
			if pathtree.Within(p, q) {
				return // protected: nothing under it
			}
		}
		holds := false
		for _, q := range protect {
			holds = holds || pathtree.Within(q, p)
		}
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink != 0 {
			return
		}
		if !holds || !fi.IsDir() {
			out = append(out, grant{path: p, dir: fi.IsDir()})
			return
		}
		if depth > 64 {
			return
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return
		}
		for _, e := range entries {
			walk(filepath.Join(p, e.Name()), depth+1)
		}
	}
	for _, r := range roots {
		if r = filepath.Clean(r); filepath.IsAbs(r) {
			walk(r, 0)
		}
	}
	return out
}

// checkWrite refuses a write_file (which the helper does itself, unconfined) whose target,
// with symbolic links resolved, lies in a protected tree, or outside the writable ones when
// strict: the same line the kernel draws for commands.
func (s *Server) checkWrite(target string) error {
	c := s.opts.Confine
	if c == nil {
		return nil
	}
	dir, rest := filepath.Dir(target), filepath.Base(target)
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			dir = r
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
	real := filepath.Join(dir, rest)
	for _, p := range pathtree.Clean(c.Protect) {
		if pathtree.Within(real, p) && !pathtree.Within(real, s.scratchDir()) && !pathtree.Within(real, s.jobsDir()) {
			return &os.PathError{Op: "write", Path: target, Err: errProtected}
		}
	}
	if c.Strict {
		for _, w := range pathtree.Clean(append(c.Writable, "/dev")) {
			if pathtree.Within(real, w) {
				return nil
			}
		}
		return &os.PathError{Op: "write", Path: target, Err: errProtected}
	}
	return nil
}

var errProtected = os.ErrPermission
