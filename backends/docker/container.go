package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Container roles (the labelRole values).
const (
	roleSession = "session"
	rolePool    = "pool"
	rolePrep    = "prep"
)

// prepare finds the helper binary for the engine's architecture. It runs once per backend
// (a failure is retried next time).
func (b *Backend) prepare(ctx context.Context) error {
	b.prepMu.Lock()
	defer b.prepMu.Unlock()
	b.resolveImage(ctx)
	if b.agent != nil {
		return nil
	}
	eng, err := detectEngine(ctx, b.cli, b.local, b.cfg.Runtime, b.opts.Getenv)
	if err != nil {
		return b.engineErr("connect", "", err)
	}
	arch := eng.arch
	if b.local {
		arch = runtime.GOARCH
	}
	bin, err := agentbin.Locate(arch)
	if err != nil {
		return &sandbox.Error{Backend: Name, Op: "find helper", Err: fmt.Errorf("%w: %w", err, sandbox.ErrUnavailable)}
	}
	b.eng = eng // doctor describes the engine even when it is refused below
	if err := b.limitsUnenforced(eng); err != nil {
		return &sandbox.Error{Backend: Name, Op: "check", Err: fmt.Errorf("%w: %w", err, sandbox.ErrUnavailable)}
	}
	b.agent = bin
	if eng.podman {
		b.log.Debug("engine is Podman", "product", eng.product, "init", eng.initNote)
	}
	return nil
}

// target is a running container for a session.
type target struct {
	id        string
	client    *agent.Client // a helper already attached (a container from the warm pool)
	recreated bool
	fresh     bool     // just created, claimed or restarted: nothing has run in it yet
	stale     []string // current settings the (kept) container was not made with
}

// ensure returns the session's running container: the existing one, restarted if it
// stopped, or a new one from the warm pool or created now. known is the container this
// process last used for the session ("" if none); recreated is set when the session's
// earlier state is gone.
func (b *Backend) ensure(ctx context.Context, session, known string) (target, error) {
	name := b.containerName(session)
	rec, _, hadRecord := b.records.Read(session)
	recordID := rec.ID
	recreated := false
	// With a warm pool, try the claim first: the rename succeeds only if the session has no
	// container, which spares an inspect on the fast path.
	if p := b.getPool(); p != nil {
		if e := p.claim(ctx, name); e != nil {
			b.records.Save(session, sandbox.IDRecord{ID: e.id})
			return target{id: e.id, client: e.client, recreated: hadRecord || known != "", fresh: !e.reused}, nil
		}
	}
	waitFrom := time.Now()
	for attempt := 0; ; attempt++ {
		if attempt == 4 {
			return target{}, &sandbox.Error{Backend: Name, Op: "create", ID: name, Err: errors.New("the container keeps disappearing while it is being set up (is something removing it?)")}
		}
		info, err := b.inspect(ctx, name)
		if err != nil && !cerrdefs.IsNotFound(err) {
			return target{}, b.engineErr("inspect", name, err)
		}
		if err == nil {
			// A container made from other settings is kept: replacing it would end the
			// session's jobs and shell state behind the user's back (see Recreate).
			stale := b.staleSettings(info.Config.Labels)
			lost := recreated || (known != "" && known != info.ID) || (hadRecord && recordID != info.ID)
			if info.State.Status == "created" {
				// Never started: another process is still setting it up, or gave up half way.
				if time.Since(createdLabel(info.Config.Labels)) < time.Minute {
					if err := sandbox.Sleep(ctx, 100*time.Millisecond); err != nil {
						return target{}, err
					}
					attempt--
					continue
				}
				if err := b.removeContainer(ctx, info.ID, false); err != nil {
					return target{}, err
				}
				continue
			}
			switch {
			case info.State.Running && info.State.Paused:
				if _, err := b.cli.ContainerUnpause(ctx, info.ID, client.ContainerUnpauseOptions{}); err != nil {
					return target{}, b.engineErr("unpause", name, err)
				}
			case !info.State.Running:
				// Stopped (killed, its init ended, the engine restarted): /tmp and the shell
				// state are gone, the workspace volume is not.
				b.log.Info("session container stopped; starting it again", "container", name, "exit_code", info.State.ExitCode, "oom_killed", info.State.OOMKilled)
				if err := b.mountDisks(ctx, ourVolumes(info.Mounts)); err != nil {
					return target{}, err
				}
				if _, err := b.cli.ContainerStart(ctx, info.ID, client.ContainerStartOptions{}); err != nil {
					if cerrdefs.IsNotFound(err) {
						continue
					}
					b.log.Warn("cannot restart the session container; replacing it", "container", name, "err", err)
					if err := b.removeContainer(ctx, info.ID, false); err != nil {
						return target{}, err
					}
					recreated = true
					continue
				}
				lost = lost || (info.State.StartedAt != "" && !strings.HasPrefix(info.State.StartedAt, "0001-"))
			}
			if recordID != info.ID {
				b.records.Save(session, sandbox.IDRecord{ID: info.ID})
			}
			return target{id: info.ID, recreated: lost, fresh: !info.State.Running, stale: stale}, nil
		}
		// No container: this session is new, or its container was removed.
		lost := recreated || hadRecord || known != ""
		if p := b.getPool(); p != nil {
			if e := p.claim(ctx, name); e != nil {
				b.records.Save(session, sandbox.IDRecord{ID: e.id})
				return target{id: e.id, client: e.client, recreated: lost, fresh: !e.reused}, nil
			}
		}
		id, err := b.create(ctx, name, roleSession, session)
		if errors.Is(err, errNameTaken) {
			// Another process is creating it: use theirs once the engine shows it (the name
			// is taken a moment before the container can be inspected). Not a disappearance.
			if time.Since(waitFrom) > nameWait {
				return target{}, &sandbox.Error{Backend: Name, Op: "create", ID: name, Err: fmt.Errorf("the name is taken but no container by that name appeared within %s: %w", nameWait, sandbox.ErrUnavailable)}
			}
			if err := sandbox.Sleep(ctx, 20*time.Millisecond); err != nil {
				return target{}, err
			}
			attempt--
			continue
		}
		if err != nil {
			return target{}, err
		}
		b.records.Save(session, sandbox.IDRecord{ID: id})
		return target{id: id, recreated: lost, fresh: true}, nil
	}
}

var errNameTaken = errors.New("container name already in use")

// nameWait bounds the wait for a container another process is creating under the session's
// name to show up.
const nameWait = time.Minute

// create makes and starts a hardened container. Its workspace volume is bounded by
// docker.disk_limit (see diskRoot) and made writable for the sandbox user by a never-started
// helper container, in parallel with the start. The
// work is not cut short when ctx is cancelled (it takes a few hundred milliseconds), so a
// half-made container is never left behind.
func (b *Backend) create(ctx context.Context, name, role, session string) (string, error) {
	return b.createFrom(ctx, name, role, session, "", "", nil)
}

// createFrom is create with the root filesystem of image in place of docker.image (a
// snapshot's, see branch.go; "" = docker.image), everything else as configured: the container
// is labelled as made from the current settings, so it is not reported stale. A fill (a fork
// or restore) fills the new workspace volume while the container starts, in place of the
// image's directory and of prepareWorkspace: the copy brings the owner and mode of the
// source's workspace.
func (b *Backend) createFrom(ctx context.Context, name, role, session, image, snapshot string, fill func(vol string) error) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	ids, err := b.userIDs(ctx)
	if err != nil {
		return "", err
	}
	uid, gid := ids.uid, ids.gid
	spec, err := b.spec(name, role, session, ids)
	if err != nil {
		return "", &sandbox.Error{Backend: Name, Op: "create", ID: name, Err: err}
	}
	if image != "" {
		spec.config.Image = image
		// A committed image carries its source container's labels, which the engine merges
		// into the new container's: set those that would mislead gc.
		if _, ok := spec.config.Labels[labelOwner]; !ok {
			spec.config.Labels[labelOwner] = ""
		}
		spec.config.Labels[labelSnapshotOf] = snapshot
	}
	if fill != nil && spec.workspace == "" {
		return "", &sandbox.Error{Backend: Name, Op: "create", ID: name, Err: fmt.Errorf("docker.volumes mounts the workspace from the host, so the copy has no volume of its own to go into: %w", sandbox.ErrUnsupported)}
	}
	var drv *mount.Driver
	if spec.workspace != "" {
		if drv, err = b.workspaceDisk(ctx, spec.workspace, uid, gid); err != nil {
			return "", err
		}
		for i := range spec.host.Mounts {
			if m := &spec.host.Mounts[i]; m.Source == spec.workspace {
				// The engine still copies the image's directory into the new volume, owner
				// included, so prepareWorkspace still sets the owner afterwards; a fill
				// brings the source's files instead, deleted ones staying deleted.
				m.VolumeOptions.DriverConfig = drv
				m.VolumeOptions.NoCopy = fill != nil
			}
		}
	}
	if spec.workspace != "" && b.eng.podman {
		if err := b.podmanVolume(ctx, spec); err != nil {
			return "", err
		}
	}
	t0 := time.Now()
	resp, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: spec.config, HostConfig: spec.host, Name: name})
	if err != nil && drv != nil && !cerrdefs.IsConflict(err) {
		b.dropUnusedDisk(spec.workspace) // made for this container, which the engine refused
	}
	if err != nil && spec.workspace != "" && b.eng.podman && !cerrdefs.IsConflict(err) {
		if _, ierr := b.inspect(ctx, name); ierr != nil { // not another process's container
			b.cli.VolumeRemove(ctx, spec.workspace, client.VolumeRemoveOptions{}) // podmanVolume's
		}
	}
	if err != nil {
		if b.eng.podman && !cerrdefs.IsConflict(err) {
			// Podman 4.3 answers a name already in use with a 500, not Docker's 409: a
			// container by that name now means another process made it first.
			if _, ierr := b.inspect(ctx, name); ierr == nil {
				return "", errNameTaken
			}
		}
		switch {
		case cerrdefs.IsConflict(err):
			return "", errNameTaken
		case cerrdefs.IsNotFound(err):
			return "", b.imageMissing(ctx, err)
		case cerrdefs.IsInvalidArgument(err):
			return "", b.engineErr("create", name, fmt.Errorf("the engine refused the container settings: %w (check the docker.* settings; hermes-sandbox doctor)", err))
		}
		return "", b.engineErr("create", name, err)
	}
	id := resp.ID
	fail := func(err error) (string, error) {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		b.cli.ContainerRemove(cctx, id, client.ContainerRemoveOptions{Force: true})
		if spec.workspace != "" {
			if v, ierr := b.cli.VolumeInspect(cctx, spec.workspace, client.VolumeInspectOptions{}); ierr == nil {
				if created, perr := time.Parse(time.RFC3339, v.Volume.CreatedAt); perr == nil && !created.Before(t0.Add(-2*time.Second)) {
					if _, err := b.cli.VolumeRemove(cctx, spec.workspace, client.VolumeRemoveOptions{Force: true}); err == nil {
						b.dropDisk(spec.workspace)
					}
				}
			}
		}
		return "", err
	}
	var wg sync.WaitGroup
	var prepErr error
	switch {
	case fill != nil:
		wg.Add(1)
		go func() {
			defer wg.Done()
			prepErr = fill(spec.workspace)
		}()
	case spec.workspace != "" && uid != 0:
		wg.Add(1)
		go func() {
			defer wg.Done()
			prepErr = b.prepareWorkspace(ctx, spec.workspace, uid, gid)
		}()
	}
	_, startErr := b.cli.ContainerStart(ctx, id, client.ContainerStartOptions{})
	wg.Wait()
	if startErr != nil {
		return fail(b.engineErr("start", name, startErr))
	}
	if prepErr != nil {
		return fail(prepErr)
	}
	b.log.Debug("container created", "container", name, "role", role, "ms", time.Since(t0).Milliseconds())
	return id, nil
}

// prepareWorkspace gives the workspace volume's root to uid:gid. The sandbox container
// cannot do it (no capabilities, read-only root), and the Engine API's archive upload skips
// the root of its destination; so a never-started container mounts the volume at /w, and an
// upload of the single directory entry "w/" into its root sets the owner. It costs about
// 50 ms, spent while the sandbox container starts.
func (b *Backend) prepareWorkspace(ctx context.Context, vol string, uid, gid int) error {
	name := "hermes-prep-" + b.scope + "-" + sandbox.RandomHex(5)
	labels := map[string]string{labelOurs: "1", labelScope: b.scope, labelRole: rolePrep,
		labelCreated: time.Now().UTC().Format(time.RFC3339Nano)}
	for k, v := range b.extra.Labels {
		labels[k] = v
	}
	resp, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: b.image(), Entrypoint: []string{agentInCtr}, Labels: labels, NetworkDisabled: true},
		HostConfig: &container.HostConfig{NetworkMode: "none", LogConfig: container.LogConfig{Type: "none"},
			Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: "/w"}}},
		Name: name})
	if err != nil {
		return b.engineErr("prepare workspace", vol, err)
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if _, err := b.cli.ContainerRemove(cctx, resp.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			b.log.Warn("remove workspace helper container", "container", name, "err", err)
		}
	}()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "w/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: uid, Gid: gid, ModTime: time.Now()}); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := b.cli.CopyToContainer(ctx, resp.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: &buf}); err != nil {
		return b.engineErr("prepare workspace", vol, err)
	}
	return nil
}

// inspect returns a container's details.
func (b *Backend) inspect(ctx context.Context, id string) (container.InspectResponse, error) {
	res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	return res.Container, err
}

// removeContainer removes a container; withVolumes also removes its workspace volume.
func (b *Backend) removeContainer(ctx context.Context, id string, withVolumes bool) error {
	_, err := b.removeContainerVolumes(ctx, id, withVolumes, false)
	return err
}

// removeContainerVolumes removes a container (unless dryRun) and, withVolumes, its workspace
// volumes, whose names it returns.
func (b *Backend) removeContainerVolumes(ctx context.Context, id string, withVolumes, dryRun bool) ([]string, error) {
	var vols []string
	if withVolumes {
		if info, err := b.inspect(ctx, id); err == nil {
			vols = ourVolumes(info.Mounts)
		}
	}
	if dryRun {
		return vols, nil
	}
	if _, err := b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return nil, b.engineErr("remove", shortID(id), err)
	}
	var errs []error
	var removed []string
	for _, v := range vols {
		if err := b.removeVolume(ctx, v); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, v)
	}
	return removed, errors.Join(errs...)
}

// ourVolumes lists the workspace volumes among a container's mounts.
func ourVolumes(mounts []container.MountPoint) []string {
	var out []string
	for _, m := range mounts {
		if m.Type == mount.TypeVolume && strings.HasPrefix(m.Name, "hermes-") && strings.HasSuffix(m.Name, "-ws") {
			out = append(out, m.Name)
		}
	}
	return out
}

// removeVolume removes a volume, retrying briefly while the engine still sees it in use.
func (b *Backend) removeVolume(ctx context.Context, name string) error {
	for i := 0; ; i++ {
		_, err := b.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
		if err == nil || cerrdefs.IsNotFound(err) {
			b.dropDisk(name)
			return nil
		}
		if !cerrdefs.IsConflict(err) || i == 10 {
			return b.engineErr("remove volume", name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func createdLabel(labels map[string]string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, labels[labelCreated])
	return t
}

// cleanupContext is for removing things after the caller may have given up.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
