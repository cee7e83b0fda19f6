package docker

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
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
//     own (hermes-snap-<scope>-<id>) inside the engine (copyVolume: a short-lived container
//     runs the helper's copytree with the source volume mounted read-only), so the files
//     never pass through this process. It replaced a tar stream through the Engine API
//     (out of the source container, through this process, into a never-started holder
//     container) and a holder container per copy;
//   - its shell state (the helper's state.json: working directory and exported variables),
//     read through the session's helper and kept on the snapshot volume's labels.
//
// The volume's labels are the snapshot's record: Snapshots lists them. Restore makes the new
// session's container as a fresh one is made (the same hardening, from the snapshot's image),
// copies the snapshot volume into its workspace volume while the container starts, and
// writes the state where the session's helper reads it first. Fork does the same straight
// from the source (one copy, no snapshot volume; with a read-only root, from the source's own
// image, untagged) and keeps no snapshot. Running processes are not carried: the new session
// starts with none of the source's processes or background jobs (the helper's job records
// live in the container's /tmp, which is not copied).

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
	volume    string // the workspace volume's name
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
			return source{info: info, workspace: m.Destination, volume: m.Name}, nil
		}
	}
	return source{}, snapErr(op, session, fmt.Errorf("its workspace is not a volume of its own (docker.volumes mounts it from the host), so a copy would share it: %w", sandbox.ErrUnsupported))
}

// captureImage makes ref name the source's root filesystem: its own image when the root is
// read-only, else a commit (which pauses the container for its duration).
func (b *Backend) captureImage(ctx context.Context, src source, ref, id string) error {
	if readOnlyRoot(src) {
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

// readOnlyRoot reports whether the source's root filesystem is read-only, so that it is its
// image's, unchanged (the writable places, /tmp and the workspace, are not in it).
func readOnlyRoot(src source) bool {
	return src.info.HostConfig != nil && src.info.HostConfig.ReadonlyRootfs
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

// copyVolume copies the files of the volume from into the volume to (new and empty) inside
// the engine: a short-lived container of image mounts from read-only at /from and to at /to,
// and the helper (bind-mounted, as in a session) copies one into the other (agent.CopyTree)
// as root with only the capabilities a copy needs (owners, modes and unreadable files), no
// network and a read-only root. It returns the bytes of the files copied.
//
// Measured against the Engine API's tar stream it replaced (out of one container, through
// this process, into another; see BENCHMARKS.md, "Branching"): the files never leave the
// engine's host, and the copy is the kernel's (copy_file_range), not an archive built,
// sent twice and unpacked.
func (b *Backend) copyVolume(ctx context.Context, image, from, to string) (int64, error) {
	name := "hermes-prep-" + b.scope + "-" + sandbox.RandomHex(5)
	labels := map[string]string{labelOurs: "1", labelScope: b.scope, labelRole: rolePrep,
		labelCreated: time.Now().UTC().Format(time.RFC3339Nano)}
	for k, v := range b.extra.Labels {
		labels[k] = v
	}
	entry := append(append([]string{agentInCtr}, b.agent.Args...), "copytree", "/from", "/to")
	hc := &container.HostConfig{NetworkMode: "none", ReadonlyRootfs: true, LogConfig: container.LogConfig{Type: "none"},
		CapDrop: []string{"ALL"}, CapAdd: []string{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID"},
		SecurityOpt: []string{"no-new-privileges:true"},
		Resources:   container.Resources{PidsLimit: ptr(int64(64))},
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: b.agent.Path, Target: agentInCtr, ReadOnly: true},
			{Type: mount.TypeVolume, Source: from, Target: "/from", ReadOnly: true, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
			{Type: mount.TypeVolume, Source: to, Target: "/to", VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
		}}
	for _, u := range b.eng.ulimits {
		hc.Ulimits = append(hc.Ulimits, &container.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	resp, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: image, User: "0:0", Entrypoint: entry, Labels: labels, NetworkDisabled: true,
			AttachStdout: true, AttachStderr: true},
		HostConfig: hc, Name: name})
	if err != nil {
		return 0, b.engineErr("copy workspace", name, err)
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if _, err := b.cli.ContainerRemove(cctx, resp.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !isNotFound(err) {
			b.log.Warn("remove workspace copy container", "container", name, "err", err)
		}
	}()
	att, err := b.cli.ContainerAttach(ctx, resp.ID, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return 0, b.engineErr("copy workspace", name, err)
	}
	defer att.Close()
	var stdout, stderr bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		stdcopy.StdCopy(&stdout, &limitedBuffer{&stderr, 4096}, att.Reader)
	}()
	wait := b.cli.ContainerWait(ctx, resp.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := b.cli.ContainerStart(ctx, resp.ID, client.ContainerStartOptions{}); err != nil {
		return 0, b.engineErr("copy workspace", name, err)
	}
	var code int64
	select {
	case w := <-wait.Result:
		code = w.StatusCode
	case err := <-wait.Error:
		return 0, b.engineErr("copy workspace", name, err)
	}
	// The attach stream ends with the container; bounded, in case an engine keeps it open.
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
		att.Close()
		<-copied
	}
	if code != 0 {
		return 0, b.engineErr("copy workspace", name, fmt.Errorf("the copy exited with %d: %s", code, strings.TrimSpace(stderr.String())))
	}
	var files, size, skipped int64
	if _, err := fmt.Sscanf(stdout.String(), "%d %d %d", &files, &size, &skipped); err != nil {
		return 0, b.engineErr("copy workspace", name, fmt.Errorf("the copy's report %q: %w", stdout.String(), err))
	}
	if skipped > 0 {
		b.log.Info("workspace copy left out devices, sockets and FIFOs", "count", skipped, "from", from, "to", to)
	}
	return size, nil
}

// limitedBuffer keeps the first max bytes written to it and drops the rest.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// Snapshot stores the session's root filesystem changes, workspace and shell state. The
// session keeps running; a command running in it meanwhile may leave its files half written
// in the copy, as in any copy of a live directory. The commit (a writable root only) and the
// workspace copy run at the same time.
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
	labels := map[string]string{labelOurs: "1", labelScope: b.scope, labelRole: roleSnapshot, labelSnapshot: id,
		labelSession: session, labelCreated: created.Format(time.RFC3339Nano), labelSnapImage: ref,
		labelSnapWork: src.workspace, labelSnapState: base64.StdEncoding.EncodeToString(state)}
	for k, v := range b.extra.Labels {
		labels[k] = v
	}
	if _, err := b.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol, Labels: labels}); err != nil {
		return sandbox.SnapshotRef{}, b.engineErr("snapshot", vol, err)
	}
	var n int64
	var copyErr error
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		n, copyErr = b.copyVolume(ctx, src.info.Image, src.volume, vol)
	}()
	imgErr := b.captureImage(ctx, src, ref, id)
	<-copied
	if err := errors.Join(imgErr, copyErr); err != nil {
		b.dropImage(ctx, ref)
		b.removeVolume(ctx, vol)
		return sandbox.SnapshotRef{}, err
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
// except that fill (given the new workspace volume) fills its workspace while the container
// starts, and writes the shell state that state returns for its helper. On an error nothing
// of the new session is left.
func (b *Backend) materialize(ctx context.Context, op, session, image, snapshot string, state func() ([]byte, error), fill func(vol string) error) error {
	if err := b.prepare(ctx); err != nil {
		return err
	}
	id, err := b.createFrom(ctx, b.containerName(session), roleSession, session, image, snapshot, fill)
	if errors.Is(err, errNameTaken) {
		return snapErr(op, session, fmt.Errorf("a session of that name was made meanwhile: %w", sandbox.ErrInvalidConfig))
	}
	if err != nil {
		return err
	}
	b.records.Save(session, sandbox.IDRecord{ID: id})
	st, err := state()
	if err == nil {
		err = b.writeState(ctx, session, st)
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
	if path.Base(work) != path.Base(workdir(b.cfg)) {
		return snapErr("restore", snapshotID, fmt.Errorf("the workspace was at %s and is now at %s (docker.cwd changed): %w", work, workdir(b.cfg), sandbox.ErrInvalidConfig))
	}
	return b.materialize(ctx, "restore", newSession, image, snapshotID, func() ([]byte, error) { return state, nil }, func(vol string) error {
		_, err := b.copyVolume(ctx, image, b.snapshotVol(snapshotID), vol)
		return err
	})
}

// Fork makes newSession as a copy of session, straight from it: no snapshot is kept. The
// source's shell state is read while the new container is made and its workspace copied.
func (b *Backend) Fork(ctx context.Context, session, newSession string) error {
	src, err := b.branchSource(ctx, "fork", session)
	if err != nil {
		return err
	}
	if err := b.claimName(ctx, "fork", newSession); err != nil {
		return err
	}
	if path.Base(src.workspace) != path.Base(workdir(b.cfg)) {
		return snapErr("fork", session, fmt.Errorf("the workspace was at %s and is now at %s (docker.cwd changed): %w", src.workspace, workdir(b.cfg), sandbox.ErrInvalidConfig))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Minute)
	defer cancel()
	image := src.info.Image
	if !readOnlyRoot(src) {
		// The root may have changed: commit it. The new container holds the image; the
		// reference was only needed to create it. The commit pauses the source, so its
		// state is read after it (an exec into a paused container fails).
		ref := b.snapshotRef("fork-" + sandbox.RandomHex(6))
		if err := b.captureImage(ctx, src, ref, "fork"); err != nil {
			return err
		}
		defer b.dropImage(ctx, ref)
		image = ref
	}
	var state []byte
	stateErr := errors.New("not read")
	read := make(chan struct{})
	go func() {
		defer close(read)
		state, stateErr = b.readState(ctx, session)
	}()
	defer func() { <-read }()
	return b.materialize(ctx, "fork", newSession, image, "", func() ([]byte, error) { <-read; return state, stateErr }, func(vol string) error {
		_, err := b.copyVolume(ctx, image, src.volume, vol)
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
