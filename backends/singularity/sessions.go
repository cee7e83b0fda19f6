//go:build !windows

package singularity

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Sessions lists the sessions of this state directory: those whose instance runs, and those
// whose instance stopped but whose workspace remains (state "stopped"; the next command
// starts the instance again).
func (b *Backend) Sessions(ctx context.Context) ([]sandbox.SessionInfo, error) {
	list, err := b.instances(ctx)
	if err != nil {
		return nil, wrap("list sessions", "", err)
	}
	byName := map[string]sandbox.SessionInfo{}
	for _, i := range list {
		if name := b.sessionOf(i.Instance); name != "" {
			byName[name] = sandbox.SessionInfo{Name: name, Backend: Name, ID: i.Instance, State: "running", Cwd: workdir(b.cfg)}
		}
	}
	entries, err := os.ReadDir(filepath.Join(b.dir, "sessions"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, wrap("list sessions", "", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || sandbox.ValidateSessionName(name) != nil {
			continue
		}
		info, ok := byName[name]
		if !ok {
			info = sandbox.SessionInfo{Name: name, Backend: Name, ID: b.instanceName(name), State: "stopped"}
		}
		if _, used, ok := b.records.Read(name); ok {
			info.Created, info.Used = used, used
		}
		byName[name] = info
	}
	out := make([]sandbox.SessionInfo, 0, len(byName))
	for _, info := range byName {
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove stops the session's instance (which ends its helpers and background jobs) and
// deletes its workspace, overlay and env file.
func (b *Backend) Remove(ctx context.Context, name string) error {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return wrap("remove", name, err)
	}
	// Its spill files go with it, whatever becomes of the sandbox.
	defer sandbox.RemoveSpills(b.spillDir, name)
	inst := b.instanceName(name)
	running, err := b.running(ctx, inst)
	if err != nil {
		return wrap("remove", name, err)
	}
	dir := b.sessionDir(name)
	_, statErr := os.Lstat(dir)
	if !running && errors.Is(statErr, fs.ErrNotExist) {
		return wrap("remove", name, fmt.Errorf("no such session: %w", sandbox.ErrNotFound))
	}
	if running {
		if err := b.stop(ctx, inst); err != nil {
			return wrap("remove", name, err)
		}
	}
	if err := removeAll(dir); err != nil {
		return wrap("remove", name, err)
	}
	return nil
}

// removeAll deletes dir even where an overlay left directories without write permission.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
