package docker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Branching (sandbox.Brancher). A snapshot of a session is three things:
//
//   - its root filesystem: the container committed to an image, tagged
//     hermes-snapshot-<scope>:<id>. With a read-only root (docker.read_only_rootfs, the
//     default) nothing can have changed there, so the container's own image is tagged
//     instead: a commit costs seconds on a slow storage driver and would store nothing;
//   - its workspace: the /workspace volume's files, copied into a volume of the snapshot's
//     own (hermes-snap-<scope>-<id>) as a tar stream through the Engine API. Measured here
//     (2 cores under load, fuse-overlayfs, 100 MB of workspace): the API stream ≈ 2.9–3.1 s,
//     a `cp -a` in a started helper container ≈ 2.9–5.6 s, an image layer (a second commit
//     carrying the files, filled into the new volume by the engine's copy-up) ≈ 10–13 s for
//     commit, copy, commit and run; the stream needs no tool in the image and no container
//     start, so it is the one used;
//   - its shell state (the helper's state.json: working directory and exported variables),
//     read through the session's helper and kept on the snapshot volume's labels.
//
// The volume's labels are the snapshot's record: Snapshots lists them. Restore makes the new
// session's container as a fresh one is made (the same hardening, from the snapshot's image),
// streams the snapshot volume into its workspace volume, and writes the state where the
// session's helper reads it first. Fork does the same straight from the source (one copy, no
// snapshot volume) and keeps no snapshot. Running processes are not carried: the new session
// starts with none of the source's processes or background jobs.

// Snapshot labels, on the snapshot's volume (and a committed image).
const (
	roleSnapshot    = "snapshot"
	labelSnapshot   = "hermes-sandbox.snapshot"         // the snapshot's id
	labelSnapImage  = "hermes-sandbox.snapshot.image"   // the image reference restores run
	labelSnapState  = "hermes-sandbox.snapshot.state"   // base64 of the helper's state.json
	labelSnapSize   = "hermes-sandbox.snapshot.size"    // bytes of workspace copied
	labelSnapWork   = "hermes-sandbox.snapshot.workdir" // where the workspace was mounted
	labelSnapshotOf = "hermes-sandbox.snapshot-of"      // on a restored container: its snapshot
)

var snapshotID = regexp.MustCompile(`^[0-9a-f]{12}$`)

func (b *Backend) snapshotRef(id string) string { return "hermes-snapshot-" + b.scope + ":" + id }
func (b *Backend) snapshotVol(id string) string { return "hermes-snap-" + b.scope + "-" + id }
func (b *Backend) stateFile() string            { return helperState + "/state.json" }
func snapErr(op, id string, err error) error {
	return &sandbox.Error{Backend: Name, Op: op, ID: id, Err: err}
}
func notSnapshot(op, id string, why string) error {
	return snapErr(op, id, fmt.Errorf("%s: %w", why, sandbox.ErrNotFound))
}

// source is a session's container as branching needs it.
type source struct {
	info      container.InspectResponse
	workspace string // the workspace volume's mount point in the container
}

// branchSource finds the session's container and its workspace volume. A session without a
// container is not found; one whose workspace is a directory of this host (docker.volumes
// mounting the workspace) cannot be branched, as every copy would share it.
func (b *Backend) branchSource(ctx context.Context, op, session string) (source, error) {
	if err := sandbox.ValidateSessionName(session); err != nil {
		return source{}, snapErr(op, session, err)
	}
	if err := b.prepare(ctx); err != nil {
		return source{}, err
	}
	info, err := b.inspect(ctx, b.containerName(session))
	if err != nil {
		if isNotFound(err) {
			return source{}, snapErr(op, session, fmt.Errorf("no such session: %w", sandbox.ErrNotFound))
		}
		return source{}, b.engineErr(op, session, err)
	}
	for _, m := range info.Mounts {
		if m.Type == mount.TypeVolume && m.Name == b.containerName(session)+"-ws" {
			return source{info: info, workspace: m.Destination}, nil
		}
	}
	return source{}, snapErr(op, session, fmt.Errorf("its workspace is not a volume of its own (docker.volumes mounts it from the host), so a copy would share it: %w", sandbox.ErrUnsupported))
}

// captureImage makes ref name the source's root filesystem: its own image when the root is
// read-only, else a commit (which pauses the container for its duration).
func (b *Backend) captureImage(ctx context.Context, src source, ref, id string) error {
	if src.info.HostConfig != nil && src.info.HostConfig.ReadonlyRootfs {
		if _, err := b.cli.ImageTag(ctx, client.ImageTagOptions{Source: src.info.Image, Target: ref}); err != nil {
			return b.engineErr("snapshot", src.info.Name, err)
		}
		return nil
	}
	_, err := b.cli.ContainerCommit(ctx, src.info.ID, client.ContainerCommitOptions{Reference: ref,
		Comment: "hermes-sandbox snapshot " + id, Changes: []string{"LABEL " + labelSnapshot + "=" + id}})
	if err != nil {
		return b.engineErr("snapshot", src.info.Name, err)
	}
	return nil
}

// dropImage removes the reference ref; the image itself stays while a container uses it (a
// session restored from it) and goes with that session (see Remove).
func (b *Backend) dropImage(ctx context.Context, ref string) error {
	if _, err := b.cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true}); err != nil && !isNotFound(err) {
		return b.engineErr("remove snapshot image", ref, err)
	}
	return nil
}

// readState reads the session's saved shell state through a helper of its own; nil when the
// session has none saved yet (it starts from the defaults).
func (b *Backend) readState(ctx context.Context, session string) ([]byte, error) {
	s, err := b.Open(ctx, session)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	data, err := s.(sandbox.FileSystem).ReadFile(ctx, b.stateFile(), 0, 0)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, nil
	}
	return data, err
}

// writeState puts state where the new session's helpers read it when they start.
func (b *Backend) writeState(ctx context.Context, session string, state []byte) error {
	if len(state) == 0 {
		return nil
	}
	s, err := b.Open(ctx, session)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.(sandbox.FileSystem).WriteFile(ctx, b.stateFile(), state, 0o600)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// copyTree streams the directory from (in container fromID) into the directory of the same
// name in toID, owners and modes kept (the engine applies the archive's owners; CopyUIDGID
// would give every file to the container's user instead), and returns the bytes of the stream.
func (b *Backend) copyTree(ctx context.Context, fromID, from, toID, to string) (int64, error) {
	if path.Base(from) != path.Base(to) {
		return 0, fmt.Errorf("the workspace was at %s and is now at %s (docker.cwd changed): %w", from, to, sandbox.ErrInvalidConfig)
	}
	res, err := b.cli.CopyFromContainer(ctx, fromID, client.CopyFromContainerOptions{SourcePath: from})
	if err != nil {
		return 0, b.engineErr("copy workspace", shortID(fromID), err)
	}
	defer res.Content.Close()
	cr := &countingReader{r: res.Content}
	if _, err := b.cli.CopyToContainer(ctx, toID, client.CopyToContainerOptions{DestinationPath: path.Dir(to), Content: cr}); err != nil {
		return cr.n, b.engineErr("copy workspace", shortID(toID), err)
	}
	return cr.n, nil
}

// holder creates a never-started container with vol mounted at dir, so the Engine API's
// archive calls can reach the volume; remove removes it.
func (b *Backend) holder(ctx context.Context, image, vol, dir string) (id string, remove func(), err error) {
	name := "hermes-prep-" + b.scope + "-" + sandbox.RandomHex(5)
	labels := map[string]string{labelOurs: "1", labelScope: b.scope, labelRole: rolePrep,
		labelCreated: time.Now().UTC().Format(time.RFC3339Nano)}
	for k, v := range b.extra.Labels {
		labels[k] = v
	}
	resp, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: image, Entrypoint: []string{agentInCtr}, Labels: labels, NetworkDisabled: true},
		HostConfig: &container.HostConfig{NetworkMode: "none", LogConfig: container.LogConfig{Type: "none"},
			Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: dir}}},
		Name: name})
	if err != nil {
		return "", nil, b.engineErr("snapshot", name, err)
	}
	return resp.ID, func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if _, err := b.cli.ContainerRemove(cctx, resp.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !isNotFound(err) {
			b.log.Warn("remove snapshot helper container", "container", name, "err", err)
		}
	}, nil
}

// Snapshot stores the session's root filesystem changes, workspace and shell state. The
// session keeps running; a command running in it meanwhile may leave its files half written
// in the copy, as in any copy of a live directory.
func (b *Backend) Snapshot(ctx context.Context, session string) (sandbox.SnapshotRef, error) {
	src, err := b.branchSource(ctx, "snapshot", session)
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	state, err := b.readState(ctx, session)
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Minute) // never leave half a snapshot
	defer cancel()
	id := sandbox.RandomHex(6)
	ref, vol := b.snapshotRef(id), b.snapshotVol(id)
	created := time.Now().UTC()
	if err := b.captureImage(ctx, src, ref, id); err != nil {
		return sandbox.SnapshotRef{}, err
	}
	fail := func(err error) (sandbox.SnapshotRef, error) {
		b.dropImage(ctx, ref)
		b.removeVolume(ctx, vol)
		return sandbox.SnapshotRef{}, err
	}
	labels := map[string]string{labelOurs: "1", labelScope: b.scope, labelRole: roleSnapshot, labelSnapshot: id,
		labelSession: session, labelCreated: created.Format(time.RFC3339Nano), labelSnapImage: ref,
		labelSnapWork: src.workspace, labelSnapState: base64.StdEncoding.EncodeToString(state)}
	for k, v := range b.extra.Labels {
		labels[k] = v
	}
	if _, err := b.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol, Labels: labels}); err != nil {
		return fail(b.engineErr("snapshot", vol, err))
	}
	hold, remove, err := b.holder(ctx, ref, vol, src.workspace)
	if err != nil {
		return fail(err)
	}
	defer remove()
	n, err := b.copyTree(ctx, src.info.ID, src.workspace, hold, src.workspace)
	if err != nil {
		return fail(err)
	}
	// The size is known only now, and a volume's labels cannot change: it is kept on this
	// host, beside the session records (0 = unknown where that file is missing).
	b.noteSize(id, n)
	return sandbox.SnapshotRef{ID: id, Backend: Name, Session: session, Created: created, Size: n, Native: ref}, nil
}

// sizePath is where the size of a snapshot's workspace copy is kept.
func (b *Backend) sizePath(id string) string {
	return filepath.Join(filepath.Dir(b.records.Dir), "snapshots", id+".size")
}

func (b *Backend) noteSize(id string, n int64) {
	p := b.sizePath(id)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err == nil {
		_ = os.WriteFile(p, []byte(strconv.FormatInt(n, 10)), 0o600)
	}
}

func (b *Backend) readSize(id string) int64 {
	data, _ := os.ReadFile(b.sizePath(id))
	n, _ := strconv.ParseInt(string(data), 10, 64)
	return n
}

// snapshotVolume finds a snapshot's volume in this scope.
func (b *Backend) snapshotVolume(ctx context.Context, op, id string) (map[string]string, error) {
	if !snapshotID.MatchString(id) {
		return nil, notSnapshot(op, id, "not a docker snapshot id (12 hexadecimal digits; `sessions snapshots` lists them)")
	}
	v, err := b.cli.VolumeInspect(ctx, b.snapshotVol(id), client.VolumeInspectOptions{})
	if err != nil {
		if isNotFound(err) {
			return nil, notSnapshot(op, id, "no such snapshot")
		}
		return nil, b.engineErr(op, id, err)
	}
	l := v.Volume.Labels
	if l[labelRole] != roleSnapshot || l[labelScope] != b.scope || l[labelSnapshot] != id {
		return nil, notSnapshot(op, id, "no such snapshot")
	}
	return l, nil
}

// claimName refuses a new session name that is taken: by a container, or by a workspace
// volume a removed container left (it would be mounted, old files and all).
func (b *Backend) claimName(ctx context.Context, op, session string) error {
	if err := sandbox.ValidateSessionName(session); err != nil {
		return snapErr(op, session, err)
	}
	cname := b.containerName(session)
	if _, err := b.inspect(ctx, cname); err == nil {
		return snapErr(op, session, fmt.Errorf("a session of that name exists; remove it first (`sessions rm %s`) or choose another name: %w", session, sandbox.ErrInvalidConfig))
	} else if !isNotFound(err) {
		return b.engineErr(op, session, err)
	}
	if _, err := b.cli.VolumeInspect(ctx, cname+"-ws", client.VolumeInspectOptions{}); err == nil {
		return snapErr(op, session, fmt.Errorf("the workspace volume %s of a removed session of that name is left; remove it first (`sessions rm %s`): %w", cname+"-ws", session, sandbox.ErrInvalidConfig))
	}
	return nil
}

// materialize makes the new session's container from image, as a fresh session's is made,
// fills its workspace volume with fill (given a container that mounts it at the workspace)
// and writes state for its helper. On an error nothing of the
// new session is left.
func (b *Backend) materialize(ctx context.Context, op, session, image, snapshot string, state []byte, fill func(id string) error) error {
	if err := b.prepare(ctx); err != nil {
		return err
	}
	id, err := b.createFrom(ctx, b.containerName(session), roleSession, session, image, snapshot)
	if errors.Is(err, errNameTaken) {
		return snapErr(op, session, fmt.Errorf("a session of that name was made meanwhile: %w", sandbox.ErrInvalidConfig))
	}
	if err != nil {
		return err
	}
	b.records.Save(session, sandbox.IDRecord{ID: id})
	// The engine refuses archive uploads into a container with a read-only root, even into
	// its volumes: the files go into the new workspace volume through a holder.
	to, remove, err := b.holder(ctx, image, b.containerName(session)+"-ws", workdir(b.cfg))
	if err == nil {
		err = fill(to)
		remove()
	}
	if err == nil {
		err = b.writeState(ctx, session, state)
	}
	if err != nil {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		b.removeContainer(cctx, id, true)
		b.forget(session)
		return err
	}
	return nil
}

// Restore makes newSession from a snapshot.
func (b *Backend) Restore(ctx context.Context, snapshotID, newSession string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Minute)
	defer cancel()
	labels, err := b.snapshotVolume(ctx, "restore", snapshotID)
	if err != nil {
		return err
	}
	if err := b.claimName(ctx, "restore", newSession); err != nil {
		return err
	}
	state, err := base64.StdEncoding.DecodeString(labels[labelSnapState])
	if err != nil {
		return snapErr("restore", snapshotID, fmt.Errorf("its saved shell state does not decode: %w", err))
	}
	image, work := labels[labelSnapImage], labels[labelSnapWork]
	return b.materialize(ctx, "restore", newSession, image, snapshotID, state, func(to string) error {
		from, remove, err := b.holder(ctx, image, b.snapshotVol(snapshotID), work)
		if err != nil {
			return err
		}
		defer remove()
		_, err = b.copyTree(ctx, from, work, to, workdir(b.cfg))
		return err
	})
}

// Fork makes newSession as a copy of session, straight from it: no snapshot is kept.
func (b *Backend) Fork(ctx context.Context, session, newSession string) error {
	src, err := b.branchSource(ctx, "fork", session)
	if err != nil {
		return err
	}
	if err := b.claimName(ctx, "fork", newSession); err != nil {
		return err
	}
	state, err := b.readState(ctx, session)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Minute)
	defer cancel()
	ref := b.snapshotRef("fork-" + sandbox.RandomHex(6))
	if err := b.captureImage(ctx, src, ref, "fork"); err != nil {
		return err
	}
	// The new container holds the image; the reference was only needed to create it.
	defer b.dropImage(ctx, ref)
	return b.materialize(ctx, "fork", newSession, ref, "", state, func(to string) error {
		_, err := b.copyTree(ctx, src.info.ID, src.workspace, to, workdir(b.cfg))
		return err
	})
}

// Snapshots lists this scope's snapshots, oldest first.
func (b *Backend) Snapshots(ctx context.Context) ([]sandbox.SnapshotRef, error) {
	f := client.Filters{}.Add("label", labelRole+"="+roleSnapshot).Add("label", labelScope+"="+b.scope)
	vols, err := b.cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return nil, b.engineErr("list snapshots", "", err)
	}
	var out []sandbox.SnapshotRef
	for _, v := range vols.Items {
		l := v.Labels
		id := l[labelSnapshot]
		if !snapshotID.MatchString(id) || v.Name != b.snapshotVol(id) {
			continue
		}
		created, _ := time.Parse(time.RFC3339Nano, l[labelCreated])
		out = append(out, sandbox.SnapshotRef{ID: id, Backend: Name, Session: l[labelSession], Created: created,
			Size: b.readSize(id), Native: l[labelSnapImage]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// RemoveSnapshot removes a snapshot's volume and image reference. Sessions restored from it
// keep their image until they are removed.
func (b *Backend) RemoveSnapshot(ctx context.Context, id string) error {
	labels, err := b.snapshotVolume(ctx, "remove snapshot", id)
	if err != nil {
		return err
	}
	if err := b.dropImage(ctx, labels[labelSnapImage]); err != nil {
		return err
	}
	if err := b.removeVolume(ctx, b.snapshotVol(id)); err != nil {
		return err
	}
	os.Remove(b.sizePath(id))
	return nil
}

// dropSnapshotImage removes a container's image once the container is gone, when it is a
// snapshot's commit that no reference names any more (its snapshot was removed, or it was a
// fork's). Other containers still using it keep it: the engine refuses, and that is fine.
func (b *Backend) dropSnapshotImage(ctx context.Context, image string) {
	img, err := b.cli.ImageInspect(ctx, image)
	if err != nil || img.Config == nil || img.Config.Labels[labelSnapshot] == "" || len(img.RepoTags) > 0 {
		return
	}
	if _, err := b.cli.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{}); err != nil && !cerrdefs.IsConflict(err) && !isNotFound(err) {
		b.log.Warn("remove a snapshot image no session uses", "image", shortID(img.ID), "err", err)
	}
}

// collectSnapshots removes, for Collect, snapshot images of this scope that nothing names or
// uses any more (a removal that the engine refused while a container still used the image),
// and snapshots older than ttl (terminal.snapshot_ttl).
func (b *Backend) collectSnapshots(ctx context.Context, ttl time.Duration, dryRun bool, rep *sandbox.GCReport) error {
	f := client.Filters{}.Add("dangling", "true").Add("label", labelScope+"="+b.scope)
	if imgs, err := b.cli.ImageList(ctx, client.ImageListOptions{Filters: f}); err == nil {
		for _, im := range imgs.Items {
			if im.Labels[labelSnapshot] == "" {
				continue
			}
			if !dryRun {
				if _, err := b.cli.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{}); err != nil {
					continue // in use: kept until its session goes
				}
			}
			rep.Removed = append(rep.Removed, sandbox.GCItem{Kind: "image", Name: shortID(im.ID), Reason: "a snapshot's root filesystem nothing uses"})
		}
	}
	if ttl <= 0 {
		return nil
	}
	list, err := b.Snapshots(ctx)
	if err != nil {
		return err
	}
	for _, s := range list {
		age := time.Since(s.Created)
		if age <= ttl {
			continue
		}
		it := sandbox.GCItem{Kind: "snapshot", Name: s.ID, Reason: fmt.Sprintf("of session %s, %s old (terminal.snapshot_ttl %s)", s.Session, age.Round(time.Second), ttl)}
		if !dryRun {
			if err := b.RemoveSnapshot(ctx, s.ID); err != nil {
				rep.Failed = append(rep.Failed, sandbox.GCItem{Kind: "snapshot", Name: s.ID, Reason: err.Error()})
				continue
			}
		}
		rep.Removed = append(rep.Removed, it)
	}
	return nil
}

var _ sandbox.Brancher = (*Backend)(nil)
