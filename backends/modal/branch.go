package modal

// Branching (sandbox.Brancher) on Modal's filesystem snapshots.
//
// A snapshot is SnapshotFilesystem of the session's running sandbox (the router's
// TaskSnapshotFilesystem): an Image holding the whole filesystem, the helper's saved shell
// state under /tmp/.hermes-sandbox included, so the working directory and exported
// variables come along with the files. Modal keeps no list of them that names our sessions,
// so the list is kept here, one record per snapshot in the state directory
// (modal/snapshots/<id>.json). Restore creates the new session's sandbox from the snapshot's
// image at once (so a later RemoveSnapshot cannot strand it); if that sandbox is lost later,
// the session is recreated from the configured image, as any session is. Fork is Snapshot
// then Restore; its snapshot stays listed (labelled as the fork's) until removed, because
// deleting an image a sandbox was just created from is not something Modal's contract says
// is safe. RemoveSnapshot deletes the image (ImageDelete) and forgets it.
//
// Running processes are not carried: the new sandbox starts with the snapshot's files only,
// less the helper's job records (dropJobs), so it lists none of the source's jobs.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func (b *Backend) snapRecords() *sandbox.SnapshotRecords {
	return sandbox.NewSnapshotRecords(Name, filepath.Join(b.scope.Dir(), "modal", "snapshots"), b.log)
}

// Snapshot stores a filesystem snapshot of the session's running sandbox, lists it, and
// remembers it as the session's own snapshot (modal.restore_from_snapshot starts a
// recreated sandbox from it).
func (b *Backend) Snapshot(ctx context.Context, session string) (sandbox.SnapshotRef, error) {
	return b.snapshot(ctx, session, "")
}

func (b *Backend) snapshot(ctx context.Context, session, forkOf string) (sandbox.SnapshotRef, error) {
	if err := sandbox.ValidateSessionName(session); err != nil {
		return sandbox.SnapshotRef{}, &sandbox.Error{Backend: Name, Op: "snapshot", ID: session, Err: err}
	}
	c, app, err := b.appOnly(ctx)
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	sb, err := b.find(ctx, c, app, session)
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	if sb == nil {
		return sandbox.SnapshotRef{}, &sandbox.Error{Backend: Name, Op: "snapshot", ID: session,
			Err: fmt.Errorf("the session has no running sandbox: %w", sandbox.ErrNotFound)}
	}
	img, err := sb.SnapshotFilesystem(ctx, nil)
	if err != nil {
		return sandbox.SnapshotRef{}, b.mapErr("snapshot", session, err)
	}
	snap := sandbox.SnapshotRecord{Session: session, Created: time.Now().UTC(), ForkOf: forkOf}
	if err := b.snapRecords().Write(img.ImageID, snap); err != nil {
		return sandbox.SnapshotRef{}, &sandbox.Error{Backend: Name, Op: "snapshot", ID: session,
			Err: fmt.Errorf("snapshot %s taken but not listed (remove it on Modal by hand): %w", img.ImageID, err)}
	}
	if forkOf == "" {
		rec, _, _ := b.records.Read(session)
		rec.SandboxID = sb.SandboxID
		rec.Snapshot = img.ImageID
		b.records.Save(session, rec)
	}
	return b.snapRecords().Ref(img.ImageID, snap), nil
}

// Restore makes newSession's sandbox from a listed snapshot's image.
func (b *Backend) Restore(ctx context.Context, snapshotID, newSession string) error {
	if err := sandbox.ValidateSessionName(newSession); err != nil {
		return &sandbox.Error{Backend: Name, Op: "restore", ID: newSession, Err: err}
	}
	if _, err := b.snapRecords().Known("restore", snapshotID); err != nil {
		return err
	}
	c, app, err := b.appOnly(ctx)
	if err != nil {
		return err
	}
	if _, _, had := b.records.Read(newSession); had {
		return &sandbox.Error{Backend: Name, Op: "restore", ID: newSession,
			Err: fmt.Errorf("session %s exists already; remove it or pick another name: %w", newSession, fs.ErrExist)}
	}
	if sb, err := b.find(ctx, c, app, newSession); err != nil {
		return err
	} else if sb != nil {
		return &sandbox.Error{Backend: Name, Op: "restore", ID: newSession,
			Err: fmt.Errorf("a sandbox of session %s runs already; remove it or pick another name: %w", newSession, fs.ErrExist)}
	}
	img, err := c.Images.FromID(ctx, snapshotID, nil)
	if err != nil {
		return b.mapErr("restore", snapshotID, err)
	}
	sb, err := c.Sandboxes.Create(ctx, app, img, b.createParams(newSession))
	if err != nil {
		return b.mapErr("restore", newSession, err)
	}
	if err := dropJobs(ctx, sb); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		sb.Terminate(cctx, nil)
		return b.mapErr("restore", newSession, fmt.Errorf("removing the source's job records from the new sandbox: %w", err))
	}
	b.records.Save(newSession, record{SandboxID: sb.SandboxID, Created: time.Now()})
	return nil
}

// dropJobs removes the helper's job records from a sandbox made from a snapshot. The
// snapshot holds the whole filesystem, the source's job records among it, but none of their
// processes: left in place they would be listed as the new session's own (ended) jobs, and a
// job id of the source would reach a process of the new sandbox that happens to have its PID.
// A copy starts with no jobs (README, "Branching").
func dropJobs(ctx context.Context, sb *modalsdk.Sandbox) error {
	cp, err := sb.Exec(ctx, []string{"rm", "-rf", helperState + "/jobs"}, &modalsdk.SandboxExecParams{})
	if err != nil {
		return err
	}
	code, err := cp.Wait(ctx, nil)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("rm -rf %s/jobs exited with %d", helperState, code)
	}
	return nil
}

// Fork snapshots the session and restores the snapshot as newSession; the source keeps
// running. The snapshot stays listed, marked as the fork's.
func (b *Backend) Fork(ctx context.Context, session, newSession string) error {
	if err := sandbox.ValidateSessionName(newSession); err != nil {
		return &sandbox.Error{Backend: Name, Op: "fork", ID: newSession, Err: err}
	}
	if _, _, had := b.records.Read(newSession); had {
		return &sandbox.Error{Backend: Name, Op: "fork", ID: newSession,
			Err: fmt.Errorf("session %s exists already; remove it or pick another name: %w", newSession, fs.ErrExist)}
	}
	ref, err := b.snapshot(ctx, session, newSession)
	if err != nil {
		return err
	}
	return b.Restore(ctx, ref.ID, newSession)
}

// Snapshots lists this state directory's snapshots, oldest first.
func (b *Backend) Snapshots(context.Context) ([]sandbox.SnapshotRef, error) {
	return b.snapRecords().Snapshots()
}

// RemoveSnapshot deletes the snapshot's image on Modal and forgets it. Sandboxes created from
// it keep running. An image Modal no longer has is forgotten all the same.
func (b *Backend) RemoveSnapshot(ctx context.Context, id string) error {
	if _, err := b.snapRecords().Known("snapshot rm", id); err != nil {
		return err
	}
	c, _, err := b.appOnly(ctx)
	if err != nil {
		return err
	}
	err = c.Images.Delete(ctx, id, nil)
	var notFound modalsdk.NotFoundError
	if err != nil && !errors.As(err, &notFound) {
		return b.mapErr("snapshot rm", id, err)
	}
	b.snapRecords().Drop(id)
	for _, e := range b.sessionRecords() {
		if e.Record.Snapshot == id { // restore_from_snapshot can no longer use it
			e.Record.Snapshot = ""
			b.records.Save(e.Session, e.Record)
		}
	}
	return nil
}

func (b *Backend) sessionRecords() []sandbox.RecordEntry[record] {
	entries, _ := b.records.List()
	return entries
}

var _ sandbox.Brancher = (*Backend)(nil)
