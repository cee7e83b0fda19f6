package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// leftoverAge is how old a pool or workspace-helper container of an unknown owner must be
// before GC treats it as left behind.
const leftoverAge = 10 * time.Minute

// Collect removes this state directory's session containers idle longer than the idle
// timeout (opts.IdleTimeout, else docker.idle_timeout; 0 in both means never) with no
// process running beyond the container's init, session containers whose owner process
// (labelOwner: an MCP server that removes its sessions when done) is gone, whatever their
// idle time, warm-pool containers whose process is gone,
// leftover workspace-helper containers, and workspace volumes no container uses. A session
// whose container Collect removed reports environment_recreated on its next command.
func (b *Backend) Collect(ctx context.Context, opts sandbox.GCOptions) (sandbox.GCReport, error) {
	list, err := b.ours(ctx, true)
	if err != nil {
		return sandbox.GCReport{}, err
	}
	now := time.Now()
	var cands []sandbox.GCCandidate
	for _, c := range list {
		name := containerName(c)
		age := now.Sub(createdAt(c))
		cand := sandbox.GCCandidate{Kind: "container", Name: name, LastUsed: createdAt(c),
			Remove: func(ctx context.Context) error {
				_, err := b.removeContainerVolumes(ctx, c.ID, true, false)
				return err
			}}
		for _, v := range ourVolumes(c.Mounts) {
			cand.Also = append(cand.Also, sandbox.GCItem{Kind: "volume", Name: v, Reason: "workspace of " + name})
		}
		switch session := b.sessionOf(name); {
		case strings.HasPrefix(name, "hermes-pool-"):
			cand.Owner = c.Labels[labelPool] // for a sweep of what gone processes left (GCOptions.OwnerGoneOnly)
			alive, known := sandbox.OwnerAlive(c.Labels[labelPool])
			switch {
			case known && alive:
				cand.Keep = "warm pool of a running process"
			case known:
				cand.Reap = "warm-pool leftover: its process is gone"
			case age > leftoverAge:
				cand.Reap = fmt.Sprintf("warm-pool leftover of a process this machine cannot check (another host or boot), %s old", age.Round(time.Second))
			default:
				cand.Keep = "warm pool of a process this machine cannot check (another host or boot)"
			}
		case strings.HasPrefix(name, "hermes-prep-"):
			if age <= leftoverAge {
				continue
			}
			cand.Reap = "leftover workspace helper"
		case session != "":
			if _, u, ok := b.records.Read(session); ok && u.After(cand.LastUsed) {
				cand.LastUsed = u
			}
			cand.Owner = c.Labels[labelOwner]
			if c.State == "running" {
				id := c.ID
				cand.Busy = func(ctx context.Context) (string, error) {
					if b.busy(ctx, id) {
						return "a helper or a background process is running", nil
					}
					return "", nil
				}
			}
		default:
			continue
		}
		cands = append(cands, cand)
	}
	rep, err := sandbox.Reap(ctx, cands, opts, b.cfg.IdleTimeout, "docker.idle_timeout")
	if opts.OwnerGoneOnly {
		return rep, err // their volumes went with them; the rest is gc's
	}
	errs := []error{err}
	// Workspace volumes no container uses: from removed sessions, interrupted removals.
	vols, err := b.cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", labelOurs+"=1")})
	if err != nil {
		errs = append(errs, b.engineErr("list volumes", "", err))
	} else {
		used := map[string]bool{}
		if all, err := b.ours(ctx, true); err == nil {
			for _, c := range all {
				for _, m := range c.Mounts {
					used[m.Name] = true
				}
			}
		}
		for _, v := range vols.Items {
			if used[v.Name] || v.Labels[labelRole] == roleSnapshot {
				continue // a snapshot's volume goes with its snapshot, below
			}
			if !opts.DryRun {
				// Not forced: the engine refuses a volume that any container still uses.
				if _, err := b.cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{}); err != nil {
					if !isNotFound(err) {
						rep.Kept = append(rep.Kept, sandbox.GCItem{Kind: "volume", Name: v.Name, Reason: "in use"})
					}
					continue
				}
				b.dropDisk(v.Name)
			}
			rep.Removed = append(rep.Removed, sandbox.GCItem{Kind: "volume", Name: v.Name, Reason: "no container uses it"})
		}
	}
	errs = append(errs, b.collectSnapshots(ctx, opts.SnapshotTTL, opts.DryRun, &rep))
	// Bounded workspaces whose volume is gone (a removal cut short between the two).
	orphans, err := b.orphanDisks(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, v := range orphans {
		if !opts.DryRun {
			b.dropDisk(v)
		}
		rep.Removed = append(rep.Removed, sandbox.GCItem{Kind: "disk", Name: v, Reason: "its volume is gone"})
	}
	return rep, errors.Join(errs...)
}

// busy reports whether anything beyond the container's init and idle entrypoint runs: an
// attached helper (a live client) or a background job.
func (b *Backend) busy(ctx context.Context, id string) bool {
	top, err := b.cli.ContainerTop(ctx, id, client.ContainerTopOptions{})
	if err != nil {
		return false
	}
	col := -1
	for i, t := range top.Titles {
		if t == "CMD" || t == "COMMAND" {
			col = i
		}
	}
	for _, p := range top.Processes {
		if col < 0 || col >= len(p) {
			return len(top.Processes) > 2
		}
		cmd := p[col]
		if strings.Contains(cmd, "docker-init") || strings.HasSuffix(cmd, " idle") {
			continue
		}
		return true
	}
	return false
}
