package daytona

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// scopeLabels select this scope's sandboxes.
func (b *Backend) scopeLabels() map[string]string {
	return map[string]string{labelOurs: "1", labelScope: b.scope}
}

// Sessions lists this scope's sandboxes, found by their labels.
func (b *Backend) Sessions(ctx context.Context) ([]sandbox.SessionInfo, error) {
	if err := b.validate(); err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "list", Err: err}
	}
	list, err := b.api.list(ctx, b.scopeLabels())
	if err != nil {
		return nil, b.apiErr("list", "", err)
	}
	var out []sandbox.SessionInfo
	for _, sb := range list {
		name := sb.Labels[labelSession]
		if sandbox.ValidateSessionName(name) != nil || sb.Name != b.sandboxName(name) || statesGone[sb.State] {
			continue
		}
		info := sandbox.SessionInfo{Name: name, Backend: Name, ID: sb.ID, State: sb.State}
		if rec, _, ok := b.records.Read(name); ok && rec.ID == sb.ID {
			info.Mode = rec.Mode
		}
		info.Created, _ = time.Parse(time.RFC3339Nano, sb.CreatedAt)
		info.Used, _ = time.Parse(time.RFC3339Nano, sb.LastActivityAt)
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove deletes the session's sandbox (files and all).
func (b *Backend) Remove(ctx context.Context, name string) error {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: err}
	}
	// Its spill files go with it, whatever becomes of the sandbox.
	defer sandbox.RemoveSpills(b.spillDir, name)
	if err := b.validate(); err != nil {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: err}
	}
	sname := b.sandboxName(name)
	sb, err := b.api.get(ctx, sname)
	if statusOf(err) == http.StatusNotFound || (err == nil && statesGone[sb.State]) {
		b.records.Drop(name)
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: fmt.Errorf("no such session: %w", sandbox.ErrNotFound)}
	}
	if err != nil {
		return b.apiErr("remove", name, err)
	}
	if !b.ours(sb, name) {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: sandbox.WithHint(sandbox.ErrDenied,
			fmt.Errorf("sandbox %s was not created by this tool for this session (labels %v)", sname, sb.Labels), "left alone")}
	}
	if err := b.deleteSandbox(ctx, sb.ID); err != nil {
		return err
	}
	b.records.Drop(name)
	return nil
}

// Collect stops (hibernates) this scope's started sandboxes idle longer than
// opts.IdleTimeout (default daytona.auto_stop) by the service's activity time, and deletes
// those in a failed state. Only sandboxes carrying this tool's labels are looked at: a
// sandbox without labelOurs=1 and this scope is never touched, whatever its name. A stopped
// sandbox keeps its files; the next command starts it again. Snapshots (Brancher) older than
// opts.SnapshotTTL are deleted too.
func (b *Backend) Collect(ctx context.Context, opts sandbox.GCOptions) (sandbox.GCReport, error) {
	if err := b.validate(); err != nil {
		return sandbox.GCReport{}, &sandbox.Error{Backend: Name, Op: "gc", Err: err}
	}
	list, err := b.api.list(ctx, b.scopeLabels())
	if err != nil {
		return sandbox.GCReport{}, b.apiErr("gc", "", err)
	}
	var cands []sandbox.GCCandidate
	for _, sb := range list {
		if sb.Labels[labelOurs] != "1" || sb.Labels[labelScope] != b.scope {
			continue // the service filtered loosely: never touch what is not ours
		}
		last, err := time.Parse(time.RFC3339Nano, sb.LastActivityAt)
		if err != nil {
			last, _ = time.Parse(time.RFC3339Nano, sb.CreatedAt)
		}
		id := sb.ID
		cand := sandbox.GCCandidate{Kind: "sandbox", Name: sb.Name, LastUsed: last,
			Note:   "; stopped, files kept: the next command starts it",
			Remove: func(ctx context.Context) error { return b.stopSandbox(ctx, id) }}
		switch {
		case statesFailed[sb.State]:
			cand.Reap = "deleted: state " + sb.State + " (" + orNone(sb.ErrorReason) + ")"
			cand.Remove = func(ctx context.Context) error { return b.deleteSandbox(ctx, id) }
		case sb.State != "started":
			cand.Keep = fmt.Sprintf("%s, idle for %s", sb.State, time.Since(last).Round(time.Second))
		}
		cands = append(cands, cand)
	}
	rep, err := sandbox.Reap(ctx, cands, opts, b.cfg.AutoStop, "daytona.auto_stop")
	return rep, errors.Join(err, b.collectSnapshots(ctx, opts, &rep))
}
