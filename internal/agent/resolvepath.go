//go:build unix

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxLinks bounds the symbolic links one resolution follows (Linux's own limit is 40).
const maxLinks = 40

// resolvePath answers resolve_path: req.Path with "~" and the session's directory applied
// as read_file and write_file apply them, then symbolic links resolved.
func (s *Server) resolvePath(id uint32, req CallRequest) {
	p, err := realPath(s.resolve(req.Path))
	if err != nil {
		s.sendErrFrom(id, err)
		return
	}
	_ = s.send(tReply, id, ResolveReply{Path: Bytes(p)})
}

// realPath follows the symbolic links in the absolute, clean path p the way the kernel would
// on open, component by component. Where a component does not exist (or cannot be looked
// at), the rest is appended as written: a file about to be created is named by its real
// directory, and a dangling link by the target it would create.
func realPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", &os.PathError{Op: "resolve", Path: p, Err: errInvalid}
	}
	done := string(filepath.Separator)
	rest := components(p)
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case ".":
			continue
		case "..":
			done = filepath.Dir(done)
			continue
		}
		next := filepath.Join(done, c)
		fi, err := os.Lstat(next)
		if err != nil {
			return filepath.Join(append([]string{next}, rest...)...), nil
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", &os.PathError{Op: "resolve", Path: p, Err: fmt.Errorf("more than %d symbolic links: %w", maxLinks, errInvalid)}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return filepath.Join(append([]string{next}, rest...)...), nil
		}
		if filepath.IsAbs(target) {
			done = string(filepath.Separator)
		}
		rest = append(components(target), rest...)
	}
	return done, nil
}

// components splits a path into its non-empty names.
func components(p string) []string {
	var out []string
	for c := range strings.SplitSeq(p, string(filepath.Separator)) {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}
