package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ResolveReply answers a resolve_path call.
type ResolveReply struct {
	// Path is the call's path as the helper's file calls would open it: absolute, with
	// symbolic links followed as far as the path exists.
	Path Bytes `json:"path"`
}

// ErrNoResolve says the helper is older than resolve_path: whoever asked cannot learn which
// file a path names, and must judge the path without that.
var ErrNoResolve = errors.New("the sandbox helper predates resolve_path and cannot resolve paths " +
	"(a session started with this version's helper can)")

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

// ResolvePath asks the helper which file p names in the sandbox (see resolve_path). A helper
// that does not know the call fails with ErrNoResolve.
func (c *Client) ResolvePath(ctx context.Context, p string) (string, error) {
	var rep ResolveReply
	err := c.Call(ctx, CallRequest{Op: opResolvePath, Path: p}, &rep, nil, nil)
	var re *RemoteError
	if errors.As(err, &re) && re.Kind == KindUnsupported {
		return "", fmt.Errorf("resolve %s: %w", p, ErrNoResolve)
	}
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(string(rep.Path)) {
		return "", fmt.Errorf("resolve %s: the helper answered %q, not an absolute path", p, rep.Path)
	}
	return string(rep.Path), nil
}
