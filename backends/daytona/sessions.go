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
	if err := b.validate(); err != nil {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: err}
	}
	sname := b.sandboxName(name)
	sb, err := b.api.get(ctx, sname)
	if statusOf(err) == http.StatusNotFound || (err == nil && statesGone[sb.State]) {
		b.dropRecord(name)
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: fmt.Errorf("no such session: %w", sandbox.ErrNotFound)}
	}
	if err != nil {
		return b.apiErr("remove", name, err)
	}
	if !b.ours(sb, name) {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: &kindError{kind: sandbox.ErrDenied,
			cause: fmt.Errorf("sandbox %s was not created by this tool for this session (labels %v)", sname, sb.Labels), hint: "left alone"}}
	}
	if err := b.deleteSandbox(ctx, sb.ID); err != nil {
		return err
	}
	b.dropRecord(name)
	return nil
}

// GCOptions say what GC does.
type GCOptions struct {
	// Idle: sandboxes with no activity for longer are acted on (0 = daytona.auto_stop).
	Idle time.Duration
	// Delete deletes idle sandboxes instead of stopping them.
	Delete bool
	// AllScopes acts on every sandbox this tool labelled, from any machine or state
	// directory, not only this one's.
	AllScopes bool
	DryRun    bool
}

// GCItem is one sandbox GC acted on (or would have).
type GCItem struct {
	Name   string `json:"name"`
	Action string `json:"action"` // "stop" or "delete"
	Reason string `json:"reason"`
}

// GC stops (or deletes) idle sandboxes carrying this tool's labels, and nothing else: a
// sandbox without labelOurs=1 is never touched, whatever its name.
func (b *Backend) GC(ctx context.Context, opts GCOptions) ([]GCItem, error) {
	if err := b.validate(); err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "gc", Err: err}
	}
	idle := opts.Idle
	if idle <= 0 {
		idle = b.cfg.AutoStop
	}
	sel := b.scopeLabels()
	if opts.AllScopes {
		delete(sel, labelScope)
	}
	list, err := b.api.list(ctx, sel)
	if err != nil {
		return nil, b.apiErr("gc", "", err)
	}
	var out []GCItem
	var errs []error
	now := time.Now()
	for _, sb := range list {
		if sb.Labels[labelOurs] != "1" || (!opts.AllScopes && sb.Labels[labelScope] != b.scope) {
			continue // the service filtered loosely: never touch what is not ours
		}
		last, err := time.Parse(time.RFC3339Nano, sb.LastActivityAt)
		if err != nil {
			last, _ = time.Parse(time.RFC3339Nano, sb.CreatedAt)
		}
		age := now.Sub(last)
		if age < idle {
			continue
		}
		reason := fmt.Sprintf("idle for %s (state %s)", age.Round(time.Second), sb.State)
		switch {
		case opts.Delete:
			out = append(out, GCItem{Name: sb.Name, Action: "delete", Reason: reason})
			if !opts.DryRun {
				if err := b.deleteSandbox(ctx, sb.ID); err != nil {
					errs = append(errs, err)
				} else if s := sb.Labels[labelSession]; s != "" && sb.Labels[labelScope] == b.scope {
					b.dropRecord(s)
				}
			}
		case sb.State == "started":
			out = append(out, GCItem{Name: sb.Name, Action: "stop", Reason: reason})
			if !opts.DryRun {
				if err := b.stopSandbox(ctx, sb.ID); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return out, errors.Join(errs...)
}
