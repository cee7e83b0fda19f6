package modal

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Sessions lists this state directory's sessions whose sandboxes run on Modal.
func (b *Backend) Sessions(ctx context.Context) ([]sandbox.SessionInfo, error) {
	c, app, err := b.appOnly(ctx)
	if err != nil {
		return nil, err
	}
	seq, err := c.Sandboxes.List(ctx, &modalsdk.SandboxListParams{AppID: app.AppID, Tags: map[string]string{tagOurs: "1", tagOwner: b.owner}})
	if err != nil {
		return nil, b.mapErr("list", "", err)
	}
	var out []sandbox.SessionInfo
	for sb, err := range seq {
		if err != nil {
			return nil, b.mapErr("list", "", err)
		}
		tags, err := sb.GetTags(ctx, nil)
		if err != nil {
			continue // ended while listing
		}
		name := tags[tagSession]
		if sandbox.ValidateSessionName(name) != nil {
			continue
		}
		info := sandbox.SessionInfo{Name: name, Backend: Name, ID: sb.SandboxID, State: "running"}
		if rec, used, ok := b.records.Read(name); ok {
			info.Created, info.Used = rec.Created, used
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// appOnly returns the client and the app without preparing the image.
func (b *Backend) appOnly(ctx context.Context) (*modalsdk.Client, *modalsdk.App, error) {
	c, err := b.sdk()
	if err != nil {
		return nil, nil, err
	}
	b.mu.Lock()
	app := b.app
	b.mu.Unlock()
	if app != nil {
		return c, app, nil
	}
	app, err = c.Apps.FromName(ctx, b.cfg.App, &modalsdk.AppFromNameParams{CreateIfMissing: true})
	if err != nil {
		return nil, nil, b.mapErr("app", b.cfg.App, err)
	}
	b.mu.Lock()
	b.app = app
	b.mu.Unlock()
	return c, app, nil
}

// Remove terminates the session's sandbox and forgets the session.
func (b *Backend) Remove(ctx context.Context, name string) error {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: err}
	}
	// Its spill files go with it, whatever becomes of the sandbox.
	defer sandbox.RemoveSpills(b.spillDir, name)
	c, app, err := b.appOnly(ctx)
	if err != nil {
		return err
	}
	sb, err := b.find(ctx, c, app, name)
	if err != nil {
		return err
	}
	had := b.records.Drop(name)
	if sb == nil {
		if had {
			return nil // it had ended already; the record is gone now
		}
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: sandbox.ErrNotFound}
	}
	return b.terminate(ctx, sb)
}

// Collect (`hermes-sandbox gc`) terminates sandboxes this tool tagged that are idle longer than
// modal.idle_timeout (by this state directory's record of their last use) or whose owner is
// gone (no record of them here). Sandboxes of other state directories or machines, and
// untagged ones, are never touched.
func (b *Backend) Collect(ctx context.Context, opts sandbox.GCOptions) (sandbox.GCReport, error) {
	c, app, err := b.appOnly(ctx)
	if err != nil {
		return sandbox.GCReport{}, err
	}
	seq, err := c.Sandboxes.List(ctx, &modalsdk.SandboxListParams{AppID: app.AppID, Tags: map[string]string{tagOurs: "1"}})
	if err != nil {
		return sandbox.GCReport{}, b.mapErr("list", "", err)
	}
	var cands []sandbox.GCCandidate
	for sb, err := range seq {
		if err != nil {
			return sandbox.GCReport{}, b.mapErr("list", "", err)
		}
		tags, err := sb.GetTags(ctx, nil)
		if err != nil || tags[tagOurs] != "1" {
			continue
		}
		session := tags[tagSession]
		rec, used, ok := b.records.Read(session)
		cand := sandbox.GCCandidate{Kind: "sandbox", Name: sb.SandboxID + " (session " + session + ")", LastUsed: used,
			Remove: func(ctx context.Context) error { return b.terminate(ctx, sb) }}
		switch {
		case tags[tagOwner] != b.owner:
			cand.Keep = "owned by " + tags[tagOwner]
		case !ok || rec.SandboxID != sb.SandboxID:
			cand.Reap = "no session of this state directory uses it"
		}
		cands = append(cands, cand)
	}
	return sandbox.Reap(ctx, cands, opts, b.cfg.IdleTimeout, "modal.idle_timeout")
}

// Check proves the credentials with a real call (the app lookup) and explains failures.
func (b *Backend) Check(ctx context.Context) error {
	if b.credsErr != nil {
		return &sandbox.Error{Backend: Name, Op: "check", Err: b.credsErr}
	}
	if err := validate(b.cfg); err != nil {
		return &sandbox.Error{Backend: Name, Op: "check", Err: err}
	}
	c, err := b.sdk()
	if err != nil {
		return err
	}
	// A missing environment and a missing app are both NOT_FOUND to the app lookup below, so
	// a configured environment is looked up on its own first.
	if env := b.creds.Environment; env != "" {
		if _, err := c.Environments.FromName(ctx, env, nil); err != nil {
			return b.mapErr("check environment", env, err)
		}
	}
	// Looking the app up proves the token; a missing app is fine (the first session makes it).
	if _, err := c.Apps.FromName(ctx, b.cfg.App, nil); err != nil && !errors.Is(b.classify(err), sandbox.ErrNotFound) {
		return b.mapErr("check", b.creds.ServerURL, err)
	}
	return nil
}

// Describe says where the credentials come from and which server is used, for doctor.
func (b *Backend) Describe() string {
	if b.credsErr != nil {
		return "credentials: none (" + Precedence + ")"
	}
	return fmt.Sprintf("credentials from %s; server %s; app %s", b.creds.Source, b.creds.ServerURL, b.cfg.App)
}

// SetupHint tells the setup wizard about credentials found in ~/.modal.toml.
func (b *Backend) SetupHint() string {
	if b.credsErr == nil && strings.Contains(b.creds.Source, "profile") {
		return "Found Modal credentials in " + b.creds.Source + ": leave the token questions empty to use them."
	}
	return ""
}

// Warnings lists settings that weaken isolation, and the per-command fallback when in use.
func (b *Backend) Warnings() []string {
	var w []string
	if !b.cfg.BlockNetwork {
		if len(b.cfg.CIDRAllowlist) > 0 {
			w = append(w, "modal.block_network is false: sandboxes reach "+strings.Join(b.cfg.CIDRAllowlist, ", "))
		} else {
			w = append(w, "modal.block_network is false: sandboxes reach the internet")
		}
	}
	b.mu.Lock()
	fb := b.fallbackReason
	b.mu.Unlock()
	if fb != "" {
		w = append(w, "modal: the sandbox helper could not start ("+fb+"); each command runs as its own Modal Exec with its shell state kept in a file: slower, and no jobs or terminal")
	}
	return w
}

func (b *Backend) noteFallback(reason string) {
	b.mu.Lock()
	b.fallbackReason = reason
	b.mu.Unlock()
	b.log.Warn("the sandbox helper cannot run; using one Exec per command", "reason", reason)
}

// Baseline runs `true` n times as one SDK Exec each (start, wait), in the named session's
// sandbox: the cost the helper channel avoids.
func (b *Backend) Baseline(ctx context.Context, session string, n int) (string, []time.Duration, error) {
	c, app, err := b.appOnly(ctx)
	if err != nil {
		return "", nil, err
	}
	sb, err := b.find(ctx, c, app, session)
	if err != nil {
		return "", nil, err
	}
	if sb == nil {
		return "", nil, &sandbox.Error{Backend: Name, Op: "baseline", ID: session, Err: sandbox.ErrNotFound}
	}
	defer sb.Detach()
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t := time.Now()
		cp, err := sb.Exec(ctx, []string{"true"}, nil)
		if err != nil {
			return "", nil, b.mapErr("baseline", session, err)
		}
		code, err := cp.Wait(ctx, nil)
		if err != nil {
			return "", nil, b.mapErr("baseline", session, err)
		}
		if code != 0 {
			return "", nil, &sandbox.Error{Backend: Name, Op: "baseline", ID: session, Err: fmt.Errorf("`true` exited %d", code)}
		}
		ds = append(ds, time.Since(t))
	}
	return "one SDK Exec per command (start, wait)", ds, nil
}
