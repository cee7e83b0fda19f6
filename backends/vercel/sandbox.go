package vercel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// startWait bounds how long a sandbox that another process is creating, or a VM session
// that is starting, is waited for.
var startWait = 3 * time.Minute

// ensure makes sure the session's sandbox has a running VM session. A sandbox found by name
// is used as it is, or resumed when stopped (files kept: not recreated); only a sandbox that
// is gone (while this machine had one) or has failed is made anew, and then recreated is
// true. fresh says the sandbox was just created empty (not from a snapshot, which already
// holds the helper), so the helper must be uploaded.
//
// Creating is idempotent across processes: when the create is refused because the name
// exists (HTTP 409: another process created it first, and may still be creating it), the
// sandbox is looked up by name again and that one is used, waited for until it runs.
func (b *Backend) ensure(ctx context.Context, session string) (vm *VMSession, recreated, fresh bool, err error) {
	name := b.sandboxName(session)
	rec, _, had := b.records.Read(session)
	wait := 50 * time.Millisecond
	created := false
	// joinBy bounds the retries after a create refused as a duplicate; zero until then.
	var joinBy time.Time
	// join handles a refused create: another process created the sandbox since the lookup
	// (and may still be creating it), so it is looked up again, after a pause, and used.
	// A name the API refuses but does not yet show is retried for at most startWait.
	join := func() error {
		if joinBy.IsZero() {
			joinBy = time.Now().Add(startWait)
		} else if time.Now().After(joinBy) {
			return &sandbox.Error{Backend: Name, Op: "find sandbox", ID: name,
				Err: fmt.Errorf("its creation was refused as a duplicate, yet it could not be used for %s: %w", startWait, sandbox.ErrTimeout)}
		}
		b.log.Debug("sandbox created by another process; using it", "session", session, "sandbox", name)
		if err := sandbox.Sleep(ctx, wait); err != nil {
			return b.apiErr("find sandbox", name, err)
		}
		wait = min(wait*2, time.Second)
		return nil
	}
	// remake deletes the sandbox and creates it anew; retry says another process recreated
	// it first, so it is to be looked up again and theirs used.
	remake := func(op string) (retry bool, err error) {
		if err := b.api.DeleteSandbox(ctx, name); err != nil && !isNotFound(err) {
			return false, b.apiErr(op, name, err)
		}
		recreated, created = true, true
		vm, fresh, err = b.create(ctx, session, rec)
		if isConflict(err) {
			return true, join()
		}
		return false, err
	}
	for {
		got, err := b.api.GetSandbox(ctx, name, true)
		switch {
		case isNotFound(err):
			vm, fresh, err = b.create(ctx, session, rec)
			if isConflict(err) {
				// Made anew all the same, by the other process: record it as such.
				recreated, created = had, true
				if err := join(); err != nil {
					return nil, false, false, err
				}
				continue
			}
			if err != nil {
				return nil, false, false, err
			}
			recreated, created = had, true
		case isSnapshotNotFound(err):
			// The stopped sandbox cannot resume: the snapshot it would resume from has
			// expired or been deleted. As the SDK's getOrCreate does, it is deleted and
			// made anew (its files are gone either way).
			b.log.Warn("session's sandbox cannot resume, its snapshot is gone; recreating it", "session", session, "sandbox", name)
			retry, err := remake("delete sandbox that cannot resume")
			if err != nil {
				return nil, false, false, err
			}
			if retry {
				continue
			}
		case err != nil:
			return nil, false, false, b.apiErr("find sandbox", name, err)
		default:
			switch got.Session.Status {
			case StatusRunning, StatusPending:
				vm = &got.Session
			case StatusFailed, StatusAborted:
				b.log.Warn("session's sandbox failed; recreating it", "session", session, "sandbox", name, "status", got.Session.Status)
				retry, err := remake("delete failed sandbox")
				if err != nil {
					return nil, false, false, err
				}
				if retry {
					continue
				}
			default: // stopping, snapshotting, or stopped: wait, then resume
				if err := sandbox.Sleep(ctx, wait); err != nil {
					return nil, false, false, b.apiErr("resume sandbox", name, fmt.Errorf("still %s: %w", got.Session.Status, err))
				}
				wait = min(wait*2, time.Second)
				continue
			}
		}
		if vm, err = b.waitRunning(ctx, vm); err != nil {
			return nil, false, false, err
		}
		if !had || created {
			rec.Sandbox = name
			if created || rec.Created.IsZero() {
				rec.Created = time.Now()
			}
			b.records.Save(session, rec)
		}
		return vm, recreated, fresh, nil
	}
}

// create makes the session's sandbox: from its newest snapshot when it has one, else new.
// A restore that fails falls back to a new sandbox and keeps the snapshot and its record.
// A restore never sends the runtime: the snapshot carries it (so it works with
// vercel.runtime set or not). empty is false for a restored sandbox.
func (b *Backend) create(ctx context.Context, session string, rec record) (vm *VMSession, empty bool, err error) {
	req := CreateSandboxRequest{Name: b.sandboxName(session), Persistent: true, Runtime: b.set.runtime,
		Timeout: b.set.timeout.Milliseconds(), Ports: b.set.ports, NetworkPolicy: b.set.networkPolicy(), Tags: b.tags(session)}
	if b.set.vcpus > 0 {
		req.Resources = &Resources{VCPUs: b.set.vcpus}
	}
	if n := len(rec.Snapshots); n > 0 {
		restore := req
		restore.Runtime = ""
		restore.Source = &Source{Type: "snapshot", SnapshotID: rec.Snapshots[n-1]}
		got, err := b.api.CreateSandbox(ctx, restore)
		if err == nil {
			return &got.Session, false, nil
		}
		if isConflict(err) { // another process restored it first
			return nil, false, b.apiErr("create sandbox", req.Name, err)
		}
		b.log.Warn("restore from snapshot failed; starting a new sandbox (the snapshot is kept)", "session", session,
			"snapshot", rec.Snapshots[n-1], "err", err)
	}
	got, err := b.api.CreateSandbox(ctx, req)
	if err != nil {
		return nil, false, b.apiErr("create sandbox", req.Name, err)
	}
	return &got.Session, true, nil
}

// waitRunning polls a VM session until it runs, for at most startWait.
func (b *Backend) waitRunning(ctx context.Context, vm *VMSession) (*VMSession, error) {
	wait := 25 * time.Millisecond
	deadline := time.Now().Add(startWait)
	for vm.Status != StatusRunning {
		switch vm.Status {
		case StatusFailed, StatusAborted, StatusStopped:
			return nil, &sandbox.Error{Backend: Name, Op: "start sandbox", ID: vm.ID, Err: fmt.Errorf("the VM session is %s: %w", vm.Status, sandbox.ErrUnavailable)}
		}
		if time.Now().After(deadline) {
			return nil, &sandbox.Error{Backend: Name, Op: "start sandbox", ID: vm.ID, Err: fmt.Errorf("the VM session is still %s after %s: %w", vm.Status, startWait, sandbox.ErrTimeout)}
		}
		if err := sandbox.Sleep(ctx, wait); err != nil {
			return nil, b.apiErr("start sandbox", vm.ID, err)
		}
		wait = min(wait*2, 500*time.Millisecond)
		got, err := b.api.GetSession(ctx, vm.ID)
		if err != nil {
			return nil, b.apiErr("start sandbox", vm.ID, err)
		}
		vm = got
	}
	return vm, nil
}

// isSnapshotNotFound reports the service's 410 snapshot_not_found: a snapshot to create or
// resume a sandbox from is gone (sandbox.ts isSnapshotNotFoundError).
func isSnapshotNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusGone && ae.Code == "snapshot_not_found"
}
