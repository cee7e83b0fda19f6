// Package pathtree holds the path rules that the sandbox helper's confinement (internal/agent)
// and the namespace init (internal/nsbox/nsinit) both draw: which paths lie in a tree, and the
// protected and writable trees named as the places they really are.
package pathtree

import (
	"path/filepath"
	"strings"
)

// Within reports whether p is dir or below it (both clean and absolute).
func Within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// Clean keeps the absolute paths of ps, cleaned, with their symbolic links resolved where they
// exist, so that a tree named through a link is found by the place it really is.
func Clean(ps []string) []string {
	var out []string
	for _, p := range ps {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		out = append(out, p)
	}
	return out
}
