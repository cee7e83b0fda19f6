package vercel

// Branching (sandbox.Brancher) on Vercel's snapshots.
//
// A snapshot is POST /v2/sandboxes/sessions/{id}/snapshot of the session's running VM. On
// Vercel that stops the VM (api-client.ts createSnapshot; the session is "snapshotting",
// then stopped), so Snapshot resumes the source at once: its files and saved shell state
// (the helper keeps it under /vercel/sandbox/.hermes) are kept, but every process that ran
// in it, background jobs included, has ended. A fork of a busy session therefore cannot keep
// the source's processes running; the conformance check for that is skipped on this backend
// with that reason.
//
// The list of snapshots is kept in the state directory (vercel/snapshots/<id>.json): the
// service's list is per project, not per session of ours. Restore creates the new session's
// sandbox from the snapshot (source {type: snapshot}, no runtime: the snapshot carries it).
// The new sandbox's copy of the helper's job records is removed (dropJobs): a copy starts
// with no jobs. Fork is Snapshot then Restore, and its snapshot stays listed, marked as the fork's: the
// client's forkSandbox route (POST /v2/sandboxes/{name}/fork) exists, but the contract does
// not say what it does to a running source or which state it copies, so it is not used.
//
// RemoveSnapshot deletes the snapshot on Vercel unless a sandbox of ours would resume from
// it (its currentSnapshotId): deleting that one would make the sandbox unable to resume (410
// snapshot_not_found) and lose its files, so it is only forgotten here, and a warning says so.

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func (b *Backend) snapRecords() *sandbox.SnapshotRecords {
	return sandbox.NewSnapshotRecords(Name, filepath.Join(filepath.Dir(b.records.Dir), "snapshots"), b.log)
}

// Snapshot saves the session's filesystem as a Vercel snapshot and resumes the session
// (taking it stopped the VM). The snapshot is listed, and the session's sandbox is restored
// from its newest snapshot if it is later lost.
func (b *Backend) Snapshot(ctx context.Context, session string) (sandbox.SnapshotRef, error) {
	return b.snapshot(ctx, session, "")
}

func (b *Backend) snapshot(ctx context.Context, session, forkOf string) (sandbox.SnapshotRef, error) {
	if err := sandbox.ValidateSessionName(session); err != nil {
		return sandbox.SnapshotRef{}, &sandbox.Error{Backend: Name, Op: "snapshot", ID: session, Err: err}
	}
	name := b.sandboxName(session)
	got, err := b.api.GetSandbox(ctx, name, false)
	if err != nil {
		return sandbox.SnapshotRef{}, b.apiErr("snapshot", session, err)
	}
	if got.Session.Status != StatusRunning {
		// Only a running VM can be snapshotted: resume it first.
		vm, _, _, err := b.ensure(ctx, session)
		if err != nil {
			return sandbox.SnapshotRef{}, err
		}
		got.Session = *vm
	}
	snap, err := b.api.CreateSnapshot(ctx, got.Session.ID)
	if err != nil {
		return sandbox.SnapshotRef{}, b.apiErr("snapshot", session, err)
	}
	rec := sandbox.SnapshotRecord{Session: session, Created: time.UnixMilli(snap.CreatedAt).UTC(), Size: snap.SizeBytes, ForkOf: forkOf}
	if snap.CreatedAt == 0 {
		rec.Created = time.Now().UTC()
	}
	if err := b.snapRecords().Write(snap.ID, rec); err != nil {
		return sandbox.SnapshotRef{}, &sandbox.Error{Backend: Name, Op: "snapshot", ID: session,
			Err: fmt.Errorf("snapshot %s taken but not listed: %w", snap.ID, err)}
	}
	srec, _, _ := b.records.Read(session)
	srec.Sandbox = name
	srec.Snapshots = append(srec.Snapshots, snap.ID)
	if err := b.records.Write(session, srec); err != nil {
		return sandbox.SnapshotRef{}, &sandbox.Error{Backend: Name, Op: "snapshot", ID: session,
			Err: fmt.Errorf("snapshot %s taken but not recorded: %w", snap.ID, err)}
	}
	// The snapshot stopped the VM: the session keeps running, as Brancher promises, on a
	// new VM with the same files.
	if _, _, _, err := b.ensure(ctx, session); err != nil {
		return sandbox.SnapshotRef{}, err
	}
	return b.snapRecords().Ref(snap.ID, rec), nil
}

// Restore creates newSession's sandbox from a listed snapshot.
func (b *Backend) Restore(ctx context.Context, snapshotID, newSession string) error {
	if err := sandbox.ValidateSessionName(newSession); err != nil {
		return &sandbox.Error{Backend: Name, Op: "restore", ID: newSession, Err: err}
	}
	if _, err := b.snapRecords().Known("restore", snapshotID); err != nil {
		return err
	}
	name := b.sandboxName(newSession)
	if _, _, had := b.records.Read(newSession); had {
		return &sandbox.Error{Backend: Name, Op: "restore", ID: newSession,
			Err: fmt.Errorf("session %s exists already; remove it or pick another name: %w", newSession, fs.ErrExist)}
	}
	req := CreateSandboxRequest{Name: name, Persistent: true, Timeout: b.set.timeout.Milliseconds(), Ports: b.set.ports,
		NetworkPolicy: b.set.networkPolicy(), Tags: b.tags(newSession), Source: &Source{Type: "snapshot", SnapshotID: snapshotID}}
	if b.set.vcpus > 0 {
		req.Resources = &Resources{VCPUs: b.set.vcpus}
	}
	got, err := b.api.CreateSandbox(ctx, req)
	if isConflict(err) {
		return &sandbox.Error{Backend: Name, Op: "restore", ID: newSession,
			Err: fmt.Errorf("a sandbox of session %s exists already; remove it or pick another name: %w", newSession, fs.ErrExist)}
	}
	if err != nil {
		return b.apiErr("restore", newSession, err)
	}
	vm, err := b.waitRunning(ctx, &got.Session)
	if err != nil {
		return err
	}
	if err := b.dropJobs(ctx, vm); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		b.api.DeleteSandbox(cctx, name)
		return &sandbox.Error{Backend: Name, Op: "restore", ID: newSession, Err: fmt.Errorf("removing the source's job records from the new sandbox: %w", err)}
	}
	if err := b.records.Write(newSession, record{Sandbox: name, Created: time.Now()}); err != nil {
		return &sandbox.Error{Backend: Name, Op: "restore", ID: newSession, Err: err}
	}
	return nil
}

// dropJobs removes the helper's job records from a sandbox made from a snapshot. The
// snapshot holds the source's files, its job records among them (the helper's state is under
// the working directory), but none of their processes: left in place they would be listed as
// the new session's own (ended) jobs, and a job id of the source would reach a process of
// the new VM that happens to have its PID. A copy starts with no jobs (README, "Branching").
func (b *Backend) dropJobs(ctx context.Context, vm *VMSession) error {
	_, _, state := helperPaths(vm.Cwd, "")
	cmd, err := b.api.RunCommand(ctx, vm.ID, RunCommandRequest{Command: "rm", Args: []string{"-rf", path.Join(state, "jobs")}}, nil, nil, nil)
	if err != nil {
		return err
	}
	if cmd.ExitCode == nil || *cmd.ExitCode != 0 {
		return fmt.Errorf("rm -rf %s/jobs exited with %v", state, cmd.ExitCode)
	}
	return nil
}

// Fork snapshots the session (which then resumes) and restores the snapshot as newSession.
// The snapshot stays listed, marked as the fork's.
func (b *Backend) Fork(ctx context.Context, session, newSession string) error {
	if err := sandbox.ValidateSessionName(newSession); err != nil {
		return &sandbox.Error{Backend: Name, Op: "fork", ID: newSession, Err: err}
	}
	if _, _, had := b.records.Read(newSession); had {
		return &sandbox.Error{Backend: Name, Op: "fork", ID: newSession,
			Err: fmt.Errorf("session %s exists already; remove it or pick another name: %w", newSession, fs.ErrExist)}
	}
	if _, _, had := b.records.Read(session); !had {
		return &sandbox.Error{Backend: Name, Op: "fork", ID: session, Err: fmt.Errorf("no such session: %w", sandbox.ErrNotFound)}
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

// RemoveSnapshot deletes the snapshot on Vercel and forgets it, or, while a sandbox of ours
// would resume from it, only forgets it (see the file's comment).
func (b *Backend) RemoveSnapshot(ctx context.Context, id string) error {
	if _, err := b.snapRecords().Known("snapshot rm", id); err != nil {
		return err
	}
	list, err := b.ours(ctx)
	if err != nil {
		return err
	}
	var users []string
	for _, sb := range list {
		if sb.CurrentSnapshotID == id {
			users = append(users, sb.Tags[tagSession])
		}
	}
	if len(users) > 0 {
		b.log.Warn("snapshot forgotten but kept on Vercel: sessions resume from it", "snapshot", id, "sessions", users)
	} else if _, err := b.api.DeleteSnapshot(ctx, id); err != nil && !isNotFound(err) {
		return b.apiErr("snapshot rm", id, err)
	}
	b.snapRecords().Drop(id)
	if entries, err := b.records.List(); err == nil {
		for _, e := range entries {
			kept := e.Record.Snapshots[:0]
			for _, s := range e.Record.Snapshots {
				if s != id {
					kept = append(kept, s)
				}
			}
			if len(kept) != len(e.Record.Snapshots) {
				e.Record.Snapshots = kept
				b.records.Save(e.Session, e.Record)
			}
		}
	}
	return nil
}

var _ sandbox.Brancher = (*Backend)(nil)
