package vercel

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// ours lists this owner's and state directory's sandboxes: only those carrying our tags.
func (b *Backend) ours(ctx context.Context) ([]SandboxMeta, error) {
	list, err := b.api.ListSandboxes(ctx, "hermes-"+b.scope+"-", map[string]string{tagMarker: "1", "hermes-scope": b.scope})
	if err != nil {
		return nil, b.apiErr("list sandboxes", "", err)
	}
	out := list[:0]
	for _, sb := range list {
		if sb.Tags[tagMarker] == "1" && sb.Tags["hermes-scope"] == b.scope && sb.Tags[tagSession] != "" {
			out = append(out, sb)
		}
	}
	return out, nil
}

// Sessions lists the sessions whose sandboxes exist.
func (b *Backend) Sessions(ctx context.Context) ([]sandbox.SessionInfo, error) {
	list, err := b.ours(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.SessionInfo, 0, len(list))
	for _, sb := range list {
		info := sandbox.SessionInfo{Name: sb.Tags[tagSession], Backend: Name, ID: sb.Name, State: string(sb.Status),
			Cwd: sb.Cwd, Created: time.UnixMilli(sb.CreatedAt)}
		if sb.StatusUpdatedAt > 0 {
			info.Used = time.UnixMilli(sb.StatusUpdatedAt)
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, c sandbox.SessionInfo) int { return a.Created.Compare(c.Created) })
	return out, nil
}

// Remove deletes the session's sandbox, its sessions and the local record. Its snapshots
// are not deleted.
func (b *Backend) Remove(ctx context.Context, name string) error {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: err}
	}
	// Its spill files go with it, whatever becomes of the sandbox.
	defer sandbox.RemoveSpills(b.spillDir, name)
	err := b.api.DeleteSandbox(ctx, b.sandboxName(name))
	if err == nil || isNotFound(err) {
		// Gone either way: forget it, so its next use is a new session, not a recreated one.
		b.records.Drop(name)
	}
	return b.apiErr("remove", name, err)
}

// Check proves the credentials, team and project with one cheap request.
func (b *Backend) Check(ctx context.Context) error {
	if _, err := b.ours(ctx); err != nil {
		return err
	}
	if _, err := b.helperBinary(); err != nil {
		return &sandbox.Error{Backend: Name, Op: "check", Err: err}
	}
	return nil
}

// Baseline runs `true` n times as one REST command each (POST …/cmd with wait), the way
// the SDK's runCommand does, in the session's sandbox.
func (b *Backend) Baseline(ctx context.Context, session string, n int) (string, []time.Duration, error) {
	vm, _, _, err := b.ensure(ctx, session)
	if err != nil {
		return "", nil, err
	}
	out := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		cmd, err := b.api.RunCommand(ctx, vm.ID, RunCommandRequest{Command: "true"}, nil, nil, nil)
		if err != nil {
			return "", nil, b.apiErr("baseline", session, err)
		}
		if cmd.ExitCode == nil || *cmd.ExitCode != 0 {
			return "", nil, &sandbox.Error{Backend: Name, Op: "baseline", ID: session, Err: fmt.Errorf("`true` exited %v", cmd.ExitCode)}
		}
		out = append(out, time.Since(t))
	}
	return "REST command per call (POST /v2/sandboxes/sessions/{id}/cmd, wait)", out, nil
}

// Collect (gc) deletes this owner's tagged sandboxes that failed, or have been stopped
// longer than --idle (there is no configured default: without it, stopped sandboxes stay);
// the idle clock is the service's time of their last change of state. Running sandboxes and
// anything without our tags are never touched. Snapshots are kept.
func (b *Backend) Collect(ctx context.Context, opts sandbox.GCOptions) (sandbox.GCReport, error) {
	list, err := b.ours(ctx)
	if err != nil {
		return sandbox.GCReport{}, err
	}
	cands := make([]sandbox.GCCandidate, 0, len(list))
	for _, sb := range list {
		session, name := sb.Tags[tagSession], sb.Name
		cand := sandbox.GCCandidate{Kind: "sandbox", Name: session + " (" + name + ")",
			LastUsed: time.UnixMilli(max(sb.StatusUpdatedAt, sb.UpdatedAt)),
			Remove: func(ctx context.Context) error {
				if err := b.api.DeleteSandbox(ctx, name); err != nil && !isNotFound(err) {
					return b.apiErr("gc", name, err)
				}
				b.records.Drop(session)
				return nil
			}}
		switch sb.Status {
		case StatusFailed, StatusAborted:
			cand.Reap = "sandbox " + string(sb.Status)
		case StatusStopped:
		default:
			cand.Keep = string(sb.Status)
		}
		cands = append(cands, cand)
	}
	return sandbox.Reap(ctx, cands, opts, 0, "")
}
