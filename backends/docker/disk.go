package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/internal/loopdisk"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// diskRoot holds the bounded workspaces (docker.disk_limit) of every state directory on this
// host. A disk is named after its volume, and volume names are the engine's, so the engine's
// host has one such place.
//
// Why a loop-mounted file system: the engine can bound a container's own layer only on some
// storage drivers (overlay2 on xfs with project quotas, btrfs, zfs) and a volume never, while
// a workspace is a volume on any of them. An ext4 file system in a sparse file bounds it on
// every host, and the file grows only as data is written.
const diskRoot = loopdisk.HostRoot

// orphanAge: a disk without a volume younger than this may be a session being created.
const orphanAge = 10 * time.Minute

// diskLimit returns the workspace size limit in bytes, 0 when there is none or it cannot be
// enforced here (diskUnenforced says why).
func (b *Backend) diskLimit() int64 {
	if b.diskUnenforced() != nil {
		return 0
	}
	return b.cfg.DiskLimit.Bytes()
}

// diskUnenforced says why a non-zero docker.disk_limit cannot be enforced here, or nil.
func (b *Backend) diskUnenforced() error {
	b.diskOnce.Do(func() {
		if b.cfg.DiskLimit <= 0 {
			return
		}
		if !b.local {
			b.diskErr = fmt.Errorf("the engine at %s is not on this host, and the limit is a file system mounted here", b.host)
			return
		}
		b.diskErr = loopdisk.Supported()
	})
	return b.diskErr
}

// disksSeen says why the engine cannot see the bounded file systems this process mounts
// under diskRoot, or nil. It can not when this process runs in a mount namespace of its own
// (a systemd unit with PrivateMounts=, ProtectSystem=…, or `unshare -m`): the engine would
// bind an empty directory or fail with a bare "no such file or directory", and the loop
// device made for it would stay attached here.
func (b *Backend) disksSeen() error {
	b.disksSeenOnce.Do(func() {
		sock, ok := strings.CutPrefix(b.host, "unix://")
		if !ok {
			return
		}
		var nerr *loopdisk.NamespaceError
		if err := loopdisk.SeenBySocketPeer(sock, diskRoot); errors.As(err, &nerr) {
			b.disksSeenErr = fmt.Errorf("docker.disk_limit %s cannot be enforced: %w, so the engine cannot see the workspace file systems "+
				"mounted under %s. Run hermes-sandbox in the engine's mount namespace: in a systemd unit, remove PrivateMounts=, "+
				"ProtectSystem=, ProtectHome=, PrivateTmp=, PrivateDevices=, ReadOnlyPaths=, ReadWritePaths=, InaccessiblePaths= "+
				"and the other settings that give the service a mount namespace of its own; or set docker.disk_limit: 0 to run "+
				"without a workspace limit: %w", b.cfg.DiskLimit, err, diskRoot, sandbox.ErrUnavailable)
		}
	})
	return b.disksSeenErr
}

// workspaceDisk readies the bounded file system for a new container's workspace volume vol
// (its data directory owned by uid:gid) and returns the volume driver settings that mount it,
// or nil when the workspace is not bounded: no limit, or vol exists from before the limit.
func (b *Backend) workspaceDisk(ctx context.Context, vol string, uid, gid int) (*mount.Driver, error) {
	size := b.diskLimit()
	if size == 0 {
		return nil, nil
	}
	if err := b.disksSeen(); err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "create", ID: vol, Err: err}
	}
	disk := loopdisk.At(diskRoot, vol)
	if v, err := b.cli.VolumeInspect(ctx, vol, client.VolumeInspectOptions{}); err == nil {
		if v.Volume.Options["device"] != disk.Data() {
			b.log.Info("workspace volume made before docker.disk_limit; it stays unbounded", "volume", vol)
			return nil, nil
		}
	} else if !cerrdefs.IsNotFound(err) {
		return nil, b.engineErr("inspect volume", vol, err)
	}
	if err := disk.Ensure(ctx, size, uid, gid); err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "create", ID: vol,
			Err: fmt.Errorf("workspace limited to %s (docker.disk_limit): %w; set docker.disk_limit: 0 to run without a limit", b.cfg.DiskLimit, err)}
	}
	return &mount.Driver{Name: "local", Options: map[string]string{"type": "none", "o": "bind", "device": disk.Data()}}, nil
}

// mountDisks mounts the bounded file systems of a stopped container's workspace volumes
// again (the host may have rebooted since), before the engine binds them.
func (b *Backend) mountDisks(ctx context.Context, vols []string) error {
	if !b.local {
		return nil // this host's disks belong to this host's engine
	}
	for _, v := range vols {
		disk := loopdisk.At(diskRoot, v)
		if !disk.Exists() || disk.Mounted() {
			continue
		}
		if err := b.disksSeen(); err != nil {
			return &sandbox.Error{Backend: Name, Op: "start", ID: v, Err: err}
		}
		if err := disk.Ensure(ctx, 0, 0, 0); err != nil {
			return &sandbox.Error{Backend: Name, Op: "start", ID: v, Err: fmt.Errorf("mount the bounded workspace: %w", err)}
		}
	}
	return nil
}

// dropDisk deletes the bounded file system of a removed volume, if it had one.
func (b *Backend) dropDisk(vol string) {
	if !b.local {
		return // this host's disks belong to this host's engine
	}
	disk := loopdisk.At(diskRoot, vol)
	if _, err := os.Stat(disk.Image); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			b.log.Warn("cannot remove the workspace's file system: run as root to remove it", "volume", vol, "image", disk.Image, "err", err)
		}
		return
	}
	if err := disk.Remove(); err != nil {
		b.log.Warn("remove the workspace's file system", "volume", vol, "err", err)
	}
}

// dropUnusedDisk deletes the bounded file system made for vol when the engine has no such
// volume (its container was refused before the volume was made), so that no loop device or
// image is left for a workspace that does not exist.
func (b *Backend) dropUnusedDisk(vol string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.cli.VolumeInspect(ctx, vol, client.VolumeInspectOptions{}); cerrdefs.IsNotFound(err) {
		b.dropDisk(vol)
	}
}

// orphanDisks lists the bounded file systems of this state directory's workspaces whose
// volume is gone (a removal interrupted between the two). A disk is made before its volume,
// so one younger than orphanAge may be a session being created, and is left alone.
func (b *Backend) orphanDisks(ctx context.Context) ([]string, error) {
	if !b.local {
		return nil, nil
	}
	loopdisk.SweepLocks(diskRoot, orphanAge)
	imgs, err := b.scopeDisks(".img")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, img := range imgs {
		if fi, err := os.Stat(img); err != nil || time.Since(fi.ModTime()) < orphanAge {
			continue
		}
		vol := strings.TrimSuffix(filepath.Base(img), ".img")
		_, err := b.cli.VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
		switch {
		case cerrdefs.IsNotFound(err):
			out = append(out, vol)
		case err != nil:
			return out, b.engineErr("inspect volume", vol, err)
		}
	}
	return out, nil
}

// scopeDisks lists the files under diskRoot, ending in suffix, of this state directory's
// session and pool workspaces.
func (b *Backend) scopeDisks(suffix string) ([]string, error) {
	var out []string
	for _, prefix := range []string{"hermes-" + b.scope + "-", "hermes-pool-" + b.scope + "-"} {
		m, err := filepath.Glob(filepath.Join(diskRoot, prefix+"*-ws"+suffix))
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}

// diskWarning is Warnings' line about docker.disk_limit, or "".
func (b *Backend) diskWarning() string {
	if b.cfg.DiskLimit == 0 {
		return "docker.disk_limit is 0 (unlimited): a command can fill the host's disk through the workspace"
	}
	if err := b.diskUnenforced(); err != nil {
		return fmt.Sprintf("docker.disk_limit %s is not enforced: %v; workspaces are unbounded (set docker.disk_limit: 0 to say so)", b.cfg.DiskLimit, err)
	}
	return ""
}
