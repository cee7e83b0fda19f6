package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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
