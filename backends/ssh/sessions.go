package ssh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pkg/sftp"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// sessionsRoot returns the remote directory holding session state, with the SFTP client.
func (b *Backend) sessionsRoot(ctx context.Context, h *host) (string, *sftp.Client, error) {
	unlock, err := h.lockSetup(ctx)
	if err != nil {
		return "", nil, err
	}
	info, err := h.remote(ctx)
	unlock()
	if err != nil {
		return "", nil, err
	}
	cl, err := h.sftp(ctx)
	if err != nil {
		return "", nil, err
	}
	return path.Join(info.home, remoteSessions), cl, nil
}

// Sessions lists the sessions whose state is on the host.
func (b *Backend) Sessions(ctx context.Context) ([]sandbox.SessionInfo, error) {
	h, err := b.host()
	if err != nil {
		return nil, wrap("list sessions", "", err)
	}
	defer h.release()
	root, cl, err := b.sessionsRoot(ctx, h)
	if err != nil {
		return nil, wrap("list sessions", "", err)
	}
	entries, err := cl.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("list sessions", "", fmt.Errorf("read %s: %w", root, err))
	}
	var out []sandbox.SessionInfo
	for _, e := range entries {
		if !e.IsDir() || sandbox.ValidateSessionName(e.Name()) != nil {
			continue
		}
		dir := root + "/" + e.Name()
		info := sandbox.SessionInfo{Name: e.Name(), Backend: Name, ID: h.s.target.String() + ":" + dir, State: "idle", Created: e.ModTime()}
		if fi, err := cl.Stat(dir + "/state.json"); err == nil {
			info.Used = fi.ModTime()
			if b, err := readSmall(cl, dir+"/state.json"); err == nil {
				var st struct {
					Cwd agent.Bytes `json:"cwd"`
				}
				if json.Unmarshal(b, &st) == nil {
					info.Cwd = string(st.Cwd)
				}
			}
		} else if fi, err := cl.Stat(dir + "/shell.cwd"); err == nil {
			info.Used = fi.ModTime()
			if b, err := readSmall(cl, dir+"/shell.cwd"); err == nil {
				info.Cwd = string(b)
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove kills the session's background jobs and deletes its state on the host.
func (b *Backend) Remove(ctx context.Context, name string) error {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return wrap("remove", name, err)
	}
	// Its spill files go with it, whatever becomes of the sandbox.
	defer sandbox.RemoveSpills(filepath.Join(b.fo.StateDir, "output"), name)
	h, err := b.host()
	if err != nil {
		return wrap("remove", name, err)
	}
	defer h.release()
	root, cl, err := b.sessionsRoot(ctx, h)
	if err != nil {
		return wrap("remove", name, err)
	}
	dir := root + "/" + name
	if _, err := cl.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return wrap("remove", name, fmt.Errorf("no such session: %w", sandbox.ErrNotFound))
	} else if err != nil {
		return wrap("remove", name, err)
	}
	var script strings.Builder
	script.WriteString(killFuncs)
	if entries, err := cl.ReadDir(dir + "/jobs"); err == nil {
		for _, e := range entries {
			if info, _, err := loadJob(cl, dir+"/jobs", e.Name()); err == nil && info.Running {
				script.WriteString("__hk " + strconv.Itoa(info.PID) + "\n")
			}
		}
	}
	script.WriteString("rm -rf -- " + shq(dir) + "\n")
	_, errOut, code, err := h.run(ctx, "exec /bin/sh", strings.NewReader(script.String()))
	if err == nil && code != 0 {
		err = fmt.Errorf("remove %s: exit %d: %s", dir, code, oneLine(errOut, 300))
	}
	if err != nil {
		return wrap("remove", name, err)
	}
	return nil
}
