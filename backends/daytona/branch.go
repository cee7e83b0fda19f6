package daytona

// Branching (sandbox.Brancher) on Daytona's sandbox snapshots and forks.
//
// The requests and the waits follow the vendor's SDKs (daytonaio/daytona,
// libs/sdk-typescript/src/Sandbox.ts and libs/sdk-go/pkg/daytona/sandbox.go), on the
// control-plane contract in ../shared/specs/daytona/api-openapi.yaml (v0.190.0):
//
//   - Snapshot is POST /sandbox/{id}/snapshot with {name} (Sandbox._experimental_createSnapshot;
//     Go ExperimentalCreateSnapshot). The sandbox is "snapshotting" meanwhile and "returns to its
//     previous state when complete" (the SDK's words): the SDK polls the sandbox while it is
//     snapshotting and fails on error or build_failed (waitForSnapshotComplete). The source was
//     started first, so it is started again after, its processes untouched. The snapshot is then
//     a Snapshot of the snapshots API, waited for until active as the SDK's snapshot.create waits
//     (Snapshot.ts: active ends the wait, error and build_failed fail it). includeMemory is left
//     out (false): a container sandbox cannot take memory, and a VM sandbox without memory must
//     be stopped first, which would end the session's processes; the service's refusal is shown.
//   - Restore creates the new session's sandbox as any is created, with CreateSandbox.snapshot
//     naming the snapshot (Daytona.create with a snapshot), and waits for it to start
//     (waitUntilStarted).
//   - Fork is POST /sandbox/{id}/fork with {name} (Sandbox._experimental_fork; Go
//     ExperimentalFork): a copy-on-write clone of the source's filesystem as a new sandbox. The
//     SDK waits for the new sandbox to be started (waitUntilStarted); this backend also waits
//     for the source to leave "forking" and be started, since the session goes on. The clone's
//     labels are set to the new session's (PUT /sandbox/{id}/labels, replaceLabels): whatever
//     the service copies from the source, a fork must never pass for its source. No snapshot
//     is listed for a fork.
//
// The shell state (working directory, exported variables) lives in the helper's state under
// the sandbox user's home ($HOME/.hermes-sandbox/state), so it comes along with the files.
// Running processes do not; the helper's job records are removed from the new sandbox
// (prepare), so it lists none of the source's jobs. Snapshots are listed in the state
// directory (daytona/snapshots/<name>.json): the organisation's snapshot list holds everyone's.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// snapshotInfo is the part of a SnapshotDto this backend reads.
type snapshotInfo struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	State       string   `json:"state"`
	Size        *float64 `json:"size"` // GB
	ErrorReason *string  `json:"errorReason"`
	CreatedAt   string   `json:"createdAt"`
}

// createSandboxSnapshot is the CreateSandboxSnapshot body, as the SDK sends it (name only).
type createSandboxSnapshot struct {
	Name string `json:"name"`
}

// forkSandbox is the ForkSandbox body.
type forkSandbox struct {
	Name string `json:"name,omitempty"`
}

type sandboxLabels struct {
	Labels map[string]string `json:"labels"`
}

// snapshotSandbox is createSandboxSnapshot, as Sandbox._experimental_createSnapshot sends it
// (libs/sdk-typescript/src/Sandbox.ts; Go: ExperimentalCreateSnapshot in sdk-go sandbox.go).
func (c *apiClient) snapshotSandbox(ctx context.Context, id, name string) (sandboxInfo, error) {
	var sb sandboxInfo
	err := c.call(ctx, http.MethodPost, "/sandbox/"+url.PathEscape(id)+"/snapshot", false, createSandboxSnapshot{Name: name}, &sb, nil)
	return sb, err
}

// fork is forkSandbox, as Sandbox._experimental_fork sends it (Sandbox.ts; Go:
// doExperimentalForkWithTimeout in sdk-go sandbox.go).
func (c *apiClient) fork(ctx context.Context, id, name string) (sandboxInfo, error) {
	var sb sandboxInfo
	err := c.call(ctx, http.MethodPost, "/sandbox/"+url.PathEscape(id)+"/fork", false, forkSandbox{Name: name}, &sb, nil)
	return sb, err
}

// replaceLabels is PUT /sandbox/{id}/labels (Sandbox.setLabels in Sandbox.ts).
func (c *apiClient) replaceLabels(ctx context.Context, id string, labels map[string]string) error {
	return c.call(ctx, http.MethodPut, "/sandbox/"+url.PathEscape(id)+"/labels", true, sandboxLabels{Labels: labels}, nil, nil)
}

// getSnapshot is GET /snapshots/{id or name} (SnapshotService.get in Snapshot.ts).
func (c *apiClient) getSnapshot(ctx context.Context, idOrName string) (snapshotInfo, error) {
	var s snapshotInfo
	err := c.call(ctx, http.MethodGet, "/snapshots/"+url.PathEscape(idOrName), true, nil, &s, nil)
	return s, err
}

// removeSnapshot is DELETE /snapshots/{id}, by id (SnapshotService.delete in Snapshot.ts).
func (c *apiClient) removeSnapshot(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/snapshots/"+url.PathEscape(id), true, nil, nil, nil)
}

func (b *Backend) snapRecords() *sandbox.SnapshotRecords {
	return sandbox.NewSnapshotRecords(Name, filepath.Join(filepath.Dir(b.records.Dir), "snapshots"), b.log)
}

// source returns the session's sandbox, started: a session that has none is ErrNotFound (a
// snapshot or fork never creates the source), one that sleeps is woken.
func (b *Backend) source(ctx context.Context, op, session string) (sandboxInfo, error) {
	if err := sandbox.ValidateSessionName(session); err != nil {
		return sandboxInfo{}, &sandbox.Error{Backend: Name, Op: op, ID: session, Err: err}
	}
	if err := b.validate(); err != nil {
		return sandboxInfo{}, &sandbox.Error{Backend: Name, Op: op, ID: session, Err: err}
	}
	sb, err := b.api.get(ctx, b.sandboxName(session))
	if statusOf(err) == http.StatusNotFound || (err == nil && statesGone[sb.State]) {
		return sb, &sandbox.Error{Backend: Name, Op: op, ID: session, Err: fmt.Errorf("no such session: %w", sandbox.ErrNotFound)}
	}
	if err != nil {
		return sb, b.apiErr(op, session, err)
	}
	if !b.ours(sb, session) {
		return sb, &sandbox.Error{Backend: Name, Op: op, ID: session, Err: sandbox.WithHint(sandbox.ErrDenied,
			fmt.Errorf("sandbox %s was not created by this tool for this session (labels %v)", sb.Name, sb.Labels), "left alone")}
	}
	if sb.State == "started" {
		return sb, nil
	}
	sb, _, err = b.ensure(ctx, session, sb.ID)
	return sb, err
}

// free checks that newSession is not a session here nor a sandbox at Daytona.
func (b *Backend) free(ctx context.Context, op, newSession string) error {
	if err := sandbox.ValidateSessionName(newSession); err != nil {
		return &sandbox.Error{Backend: Name, Op: op, ID: newSession, Err: err}
	}
	if err := b.validate(); err != nil {
		return &sandbox.Error{Backend: Name, Op: op, ID: newSession, Err: err}
	}
	exists := &sandbox.Error{Backend: Name, Op: op, ID: newSession,
		Err: fmt.Errorf("session %s exists already; remove it or pick another name: %w", newSession, fs.ErrExist)}
	if _, _, had := b.records.Read(newSession); had {
		return exists
	}
	sb, err := b.api.get(ctx, b.sandboxName(newSession))
	switch {
	case statusOf(err) == http.StatusNotFound:
		return nil
	case err != nil:
		return b.apiErr(op, newSession, err)
	case !statesGone[sb.State]:
		return exists
	}
	return nil
}

// settle polls sandbox id until it leaves the states in passing (snapshotting, forking, the
// start of a new one) and returns it; a failed state is an error, as in the SDK's waits.
func (b *Backend) settle(ctx context.Context, op, id string, passing ...string) (sandboxInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, b.extra.StateTimeout)
	defer cancel()
	for {
		sb, err := b.api.get(ctx, id)
		if err != nil {
			return sb, b.apiErr(op, id, err)
		}
		if statesFailed[sb.State] {
			return sb, &sandbox.Error{Backend: Name, Op: op, ID: sb.Name, Err: sandbox.WithKind(sandbox.ErrUnavailable,
				fmt.Errorf("the sandbox went to state %s: %s", sb.State, orNone(sb.ErrorReason)))}
		}
		still := false
		for _, p := range passing {
			still = still || sb.State == p
		}
		if !still {
			return sb, nil
		}
		if err := b.pause(ctx, "sandbox "+sb.Name+" ("+sb.State+")"); err != nil {
			return sb, err
		}
	}
}

// Snapshot stores the session's sandbox as a Daytona snapshot and lists it; the session keeps
// running (its sandbox is started again once the snapshot is taken).
func (b *Backend) Snapshot(ctx context.Context, session string) (sandbox.SnapshotRef, error) {
	src, err := b.source(ctx, "snapshot", session)
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	// Snapshot names are the organisation's: scoped and random, and a valid record name.
	name := "hermes-" + b.scope + "-" + sandbox.RandomHex(6)
	if _, err := b.api.snapshotSandbox(ctx, src.ID, name); err != nil {
		return sandbox.SnapshotRef{}, b.apiErr("snapshot", session, err)
	}
	// Listed at once: a failure below leaves a snapshot that `snapshot rm` can remove.
	rec := sandbox.SnapshotRecord{Session: session, Created: time.Now().UTC()}
	if err := b.snapRecords().Write(name, rec); err != nil {
		return sandbox.SnapshotRef{}, &sandbox.Error{Backend: Name, Op: "snapshot", ID: session,
			Err: fmt.Errorf("snapshot %s taken but not listed (remove it in Daytona by hand): %w", name, err)}
	}
	sb, err := b.settle(ctx, "snapshot", src.ID, "snapshotting")
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	if sb.State != "started" {
		if _, _, err := b.ensure(ctx, session, src.ID); err != nil {
			return sandbox.SnapshotRef{}, err
		}
	}
	snap, err := b.snapshotActive(ctx, name)
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	if snap.Size != nil {
		rec.Size = int64(*snap.Size * (1 << 30))
		b.snapRecords().Save(name, rec)
	}
	return b.snapRecords().Ref(name, rec), nil
}

// snapshotActive waits for the snapshot to become active (Snapshot.ts's terminal states).
func (b *Backend) snapshotActive(ctx context.Context, name string) (snapshotInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, b.extra.StateTimeout)
	defer cancel()
	for {
		s, err := b.api.getSnapshot(ctx, name)
		// The entry may appear only once the sandbox leaves snapshotting: a 404 is waited out.
		if err != nil && statusOf(err) != http.StatusNotFound {
			return s, b.apiErr("snapshot", name, err)
		}
		switch {
		case err != nil:
		case s.State == "active":
			return s, nil
		case s.State == "error" || s.State == "build_failed":
			reason := ""
			if s.ErrorReason != nil {
				reason = *s.ErrorReason
			}
			return s, &sandbox.Error{Backend: Name, Op: "snapshot", ID: name, Err: sandbox.WithKind(sandbox.ErrUnavailable,
				fmt.Errorf("the snapshot went to state %s: %s", s.State, orNone(reason)))}
		}
		if err := b.pause(ctx, "snapshot "+name+" to become active"); err != nil {
			return s, err
		}
	}
}

// Restore creates newSession's sandbox from a listed snapshot.
func (b *Backend) Restore(ctx context.Context, snapshotID, newSession string) error {
	if err := sandbox.ValidateSessionName(newSession); err != nil {
		return &sandbox.Error{Backend: Name, Op: "restore", ID: newSession, Err: err}
	}
	snap, err := b.snapRecords().Known("restore", snapshotID)
	if err != nil {
		return err
	}
	if err := b.free(ctx, "restore", newSession); err != nil {
		return err
	}
	sb, err := b.createFrom(ctx, newSession, snapshotID)
	if statusOf(err) == http.StatusConflict {
		return &sandbox.Error{Backend: Name, Op: "restore", ID: newSession,
			Err: fmt.Errorf("a sandbox of session %s exists already; remove it or pick another name: %w", newSession, fs.ErrExist)}
	}
	if err != nil {
		return b.apiErr("restore", newSession, err)
	}
	return b.adopt(ctx, "restore", snap.Session, newSession, sb)
}

// adopt waits for a sandbox made for newSession from session from's files (by a restore or a
// fork) to start, prepares it, and records it as newSession's; on failure it deletes it.
func (b *Backend) adopt(ctx context.Context, op, from, newSession string, sb sandboxInfo) (err error) {
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if derr := b.deleteSandbox(cctx, sb.ID); derr != nil {
				b.log.Warn("a half-made sandbox could not be deleted", "sandbox", sb.Name, "err", derr)
			}
			b.records.Drop(newSession)
		}
	}()
	if sb.Name != b.sandboxName(newSession) {
		return &sandbox.Error{Backend: Name, Op: op, ID: newSession,
			Err: fmt.Errorf("the service named the new sandbox %q, not %q: %w", sb.Name, b.sandboxName(newSession), sandbox.ErrUnavailable)}
	}
	sb, err = b.settle(ctx, op, sb.ID, "creating", "starting", "restoring", "pulling_snapshot", "pending_build", "building_snapshot", "unknown")
	if err != nil {
		return err
	}
	if sb.State != "started" {
		return &sandbox.Error{Backend: Name, Op: op, ID: newSession, Err: fmt.Errorf("the new sandbox is %s, not started: %w", sb.State, sandbox.ErrUnavailable)}
	}
	if err := b.prepare(ctx, sb, from, newSession); err != nil {
		return &sandbox.Error{Backend: Name, Op: op, ID: newSession, Err: fmt.Errorf("removing the source's job records from the new sandbox: %w", err)}
	}
	if err := b.records.Write(newSession, record{ID: sb.ID}); err != nil {
		return &sandbox.Error{Backend: Name, Op: op, ID: newSession, Err: err}
	}
	return nil
}

// prepareScript, run as `sh -c SCRIPT sh FROM TO`, makes a copy of session FROM's files
// session TO's: the helper's job records go (the copy holds none of their processes: left in
// place they would be listed as the new session's own ended jobs, and a job id of the source
// would reach a process of the new sandbox that happens to have its PID; a copy starts with no
// jobs), and the toolbox-session fallback's saved shell state, kept per session name
// (internal/shellwrap: DIR/NAME.env), is renamed, the source's other command files removed.
const prepareScript = `set -e
rm -rf "$HOME/` + helperDir + `/state/jobs"
d="$HOME/` + fbDir + `"
[ -d "$d" ] || exit 0
if [ -f "$d/$1.env" ]; then mv -f "$d/$1.env" "$d/.branch-env"; fi
rm -f "$d/$1".*
if [ -f "$d/.branch-env" ]; then mv -f "$d/.branch-env" "$d/$2.env"; fi`

// prepare runs prepareScript in sb, a copy of session from's sandbox made for session to.
func (b *Backend) prepare(ctx context.Context, sb sandboxInfo, from, to string) error {
	res, err := b.api.toolbox(sb).execute(ctx, "sh -c "+shQuote(prepareScript)+" sh "+shQuote(from)+" "+shQuote(to), "", time.Minute)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("exit %d: %s", res.ExitCode, res.Result)
	}
	return nil
}

// Fork clones the session's sandbox as newSession's (forkSandbox); the source keeps running.
func (b *Backend) Fork(ctx context.Context, session, newSession string) error {
	if err := b.free(ctx, "fork", newSession); err != nil {
		return err
	}
	src, err := b.source(ctx, "fork", session)
	if err != nil {
		return err
	}
	sb, err := b.api.fork(ctx, src.ID, b.sandboxName(newSession))
	if statusOf(err) == http.StatusConflict {
		return &sandbox.Error{Backend: Name, Op: "fork", ID: newSession,
			Err: fmt.Errorf("a sandbox of session %s exists already, or %s is busy: %w", newSession, session, fs.ErrExist)}
	}
	if err != nil {
		return b.apiErr("fork", session, err)
	}
	// The clone must never pass for its source, even for a moment: its labels first.
	if err := b.api.replaceLabels(ctx, sb.ID, b.labels(newSession)); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		b.deleteSandbox(cctx, sb.ID)
		return b.apiErr("fork", newSession, err)
	}
	if err := b.adopt(ctx, "fork", session, newSession, sb); err != nil {
		return err
	}
	// The source goes on: wait until it is started again.
	after, err := b.settle(ctx, "fork", src.ID, "forking")
	if err != nil {
		return err
	}
	if after.State != "started" {
		if _, _, err := b.ensure(ctx, session, src.ID); err != nil {
			return err
		}
	}
	return nil
}

// Snapshots lists this state directory's snapshots, oldest first.
func (b *Backend) Snapshots(context.Context) ([]sandbox.SnapshotRef, error) {
	return b.snapRecords().Snapshots()
}

// RemoveSnapshot deletes the snapshot at Daytona (removeSnapshot takes its id, looked up by
// name) and forgets it. One Daytona no longer has is forgotten all the same.
func (b *Backend) RemoveSnapshot(ctx context.Context, id string) error {
	if _, err := b.snapRecords().Known("snapshot rm", id); err != nil {
		return err
	}
	if err := b.validate(); err != nil {
		return &sandbox.Error{Backend: Name, Op: "snapshot rm", ID: id, Err: err}
	}
	s, err := b.api.getSnapshot(ctx, id)
	if err == nil {
		err = b.api.removeSnapshot(ctx, s.ID)
	}
	if err != nil && statusOf(err) != http.StatusNotFound {
		return b.apiErr("snapshot rm", id, err)
	}
	b.snapRecords().Drop(id)
	return nil
}

// collectSnapshots removes, for Collect, the snapshots older than ttl (terminal.snapshot_ttl).
func (b *Backend) collectSnapshots(ctx context.Context, opts sandbox.GCOptions, rep *sandbox.GCReport) error {
	if opts.SnapshotTTL <= 0 || opts.OwnerGoneOnly {
		return nil
	}
	list, err := b.Snapshots(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range list {
		age := time.Since(s.Created)
		if age <= opts.SnapshotTTL {
			continue
		}
		it := sandbox.GCItem{Kind: "snapshot", Name: s.ID, Reason: fmt.Sprintf("of session %s, %s old (terminal.snapshot_ttl %s)",
			s.Session, age.Round(time.Second), opts.SnapshotTTL)}
		if !opts.DryRun {
			if err := b.RemoveSnapshot(ctx, s.ID); err != nil {
				rep.Failed = append(rep.Failed, sandbox.GCItem{Kind: "snapshot", Name: s.ID, Reason: err.Error()})
				errs = append(errs, err)
				continue
			}
		}
		rep.Removed = append(rep.Removed, it)
	}
	return errors.Join(errs...)
}

var _ sandbox.Brancher = (*Backend)(nil)
