package docker

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// ours lists our containers in this backend's scope (every state, pool ones included).
func (b *Backend) ours(ctx context.Context, allScopes bool) ([]container.Summary, error) {
	f := client.Filters{}.Add("label", labelOurs+"=1")
	if !allScopes {
		f.Add("label", labelScope+"="+b.scope)
	}
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, b.engineErr("list", "", err)
	}
	return list.Items, nil
}

func containerName(c container.Summary) string {
	if len(c.Names) == 0 {
		return ""
	}
	return strings.TrimPrefix(c.Names[0], "/")
}

// createdAt is when a container was made (our label, else the engine's time).
func createdAt(c container.Summary) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, c.Labels[labelCreated]); err == nil {
		return t
	}
	return time.Unix(c.Created, 0)
}

// Sessions lists the sessions whose containers exist. Used is the last command through any
// process using this state directory.
func (b *Backend) Sessions(ctx context.Context) ([]sandbox.SessionInfo, error) {
	list, err := b.ours(ctx, false)
	if err != nil {
		return nil, err
	}
	var out []sandbox.SessionInfo
	for _, c := range list {
		name := b.sessionOf(containerName(c))
		if name == "" || sandbox.ValidateSessionName(name) != nil {
			continue
		}
		info := sandbox.SessionInfo{Name: name, Backend: Name, ID: shortID(c.ID), State: string(c.State),
			Created: createdAt(c), Cwd: b.readCwd(name)}
		info.Used = info.Created
		if _, used, ok := b.records.Read(name); ok && used.After(info.Used) {
			info.Used = used
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove removes the session's container and its workspace volume.
func (b *Backend) Remove(ctx context.Context, name string) error {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: err}
	}
	// Its spill files go with it, whatever becomes of the sandbox.
	defer sandbox.RemoveSpills(b.spillDir, name)
	cname := b.containerName(name)
	info, err := b.inspect(ctx, cname)
	if err != nil {
		if !isNotFound(err) {
			return b.engineErr("remove", name, err)
		}
		b.forget(name)
		// A workspace volume can outlive its container (removed behind our back).
		if _, verr := b.cli.VolumeInspect(ctx, cname+"-ws", client.VolumeInspectOptions{}); verr == nil {
			return b.removeVolume(ctx, cname+"-ws")
		}
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: fmt.Errorf("no such session: %w", sandbox.ErrNotFound)}
	}
	vols := ourVolumes(info.Mounts)
	if err := b.removeContainer(ctx, info.ID, false); err != nil {
		return err
	}
	b.forget(name)
	b.dropSnapshotImage(ctx, info.Image)
	for _, v := range vols {
		if err := b.removeVolume(ctx, v); err != nil {
			return err
		}
	}
	return nil
}
