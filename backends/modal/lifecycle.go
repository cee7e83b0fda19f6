package modal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"
)

// image returns the configured image, built once per process. A build that takes a while
// (the first use of an image on Modal) reports its progress to FactoryOptions.Progress.
func (b *Backend) image(ctx context.Context, c *modalsdk.Client, app *modalsdk.App) (*modalsdk.Image, error) {
	b.mu.Lock()
	img := b.built
	b.mu.Unlock()
	if img != nil {
		return img, nil
	}
	progress := b.opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	start := time.Now()
	var mu sync.Mutex
	announced := false
	slow := time.AfterFunc(time.Second, func() {
		mu.Lock()
		defer mu.Unlock()
		announced = true
		fmt.Fprintf(progress, "modal: building image %s on Modal (first use)…\n", b.cfg.Image)
	})
	img, err := c.Images.FromRegistry(b.cfg.Image, nil).Build(ctx, app, nil)
	slow.Stop()
	mu.Lock()
	if announced && err == nil {
		fmt.Fprintf(progress, "modal: image %s ready (%s, %s)\n", b.cfg.Image, img.ImageID, time.Since(start).Round(time.Millisecond))
	}
	mu.Unlock()
	if err != nil {
		return nil, b.mapErr("build image", b.cfg.Image, err)
	}
	b.mu.Lock()
	b.built = img
	b.mu.Unlock()
	return img, nil
}

// alive reports whether a sandbox still runs.
func (b *Backend) alive(ctx context.Context, sb *modalsdk.Sandbox) (bool, error) {
	code, err := sb.Poll(ctx, nil)
	if err != nil {
		if gone(err) {
			return false, nil
		}
		return false, b.mapErr("poll", sb.SandboxID, err)
	}
	return code == nil, nil
}

// find returns the session's running sandbox, or nil: by name, then by tags (a sandbox
// renamed or created by an older version still carries them). Among several tagged ones it
// takes the one the state record names, else the newest, so every lookup path converges on
// the sandbox the name lookup would give.
func (b *Backend) find(ctx context.Context, c *modalsdk.Client, app *modalsdk.App, session string) (*modalsdk.Sandbox, error) {
	sb, err := c.Sandboxes.FromName(ctx, b.cfg.App, b.sandboxName(session), nil)
	if err == nil {
		return sb, nil
	}
	if !gone(err) {
		return nil, b.mapErr("find", session, err)
	}
	seq, err := c.Sandboxes.List(ctx, &modalsdk.SandboxListParams{AppID: app.AppID,
		Tags: map[string]string{tagOurs: "1", tagSession: session, tagOwner: b.owner}})
	if err != nil {
		return nil, b.mapErr("list", session, err)
	}
	rec, _, _ := b.records.Read(session)
	var newest *modalsdk.Sandbox
	for sb, err := range seq {
		if err != nil {
			return nil, b.mapErr("list", session, err)
		}
		if sb.SandboxID == rec.SandboxID {
			return sb, nil
		}
		if newest == nil {
			newest = sb // the list is newest first
		}
	}
	return newest, nil
}

// createAttempts bounds how often ensure creates after a refusal because the name is taken
// (the holder ended before it could be looked up, and another process took the name again).
const createAttempts = 3

// ensure returns a running sandbox for the session: the one this process knows, the one
// another process left (found by name or tags), or a new one. recreated says an earlier
// sandbox of the session is gone, with its files and shell state.
//
// The sandbox's name (sandboxName) makes the creation idempotent across processes: Modal lets
// one running sandbox hold a name within an App and refuses a second create with
// ALREADY_EXISTS. So when several processes make the session's first sandbox at once, one
// create succeeds and the others look that sandbox up by its name and use it; it may still be
// scheduling, and the SDK's first Exec in it waits until it has a task.
func (b *Backend) ensure(ctx context.Context, session string, known *modalsdk.Sandbox) (*modalsdk.Sandbox, bool, error) {
	if known != nil {
		ok, err := b.alive(ctx, known)
		if err != nil {
			return nil, false, err
		}
		if ok {
			return known, false, nil
		}
	}
	c, app, err := b.appOnly(ctx)
	if err != nil {
		return nil, false, err
	}
	rec, _, had := b.records.Read(session)
	for attempt := 1; ; attempt++ {
		sb, err := b.find(ctx, c, app, session)
		if err != nil {
			return nil, false, err
		}
		if sb != nil {
			if rec.SandboxID != sb.SandboxID {
				rec.SandboxID, rec.Created = sb.SandboxID, time.Now()
				b.records.Save(session, rec)
			}
			return sb, known != nil, nil
		}
		sb, err = b.create(ctx, c, app, session, rec)
		var exists modalsdk.AlreadyExistsError
		if errors.As(err, &exists) {
			if attempt < createAttempts {
				continue // another process created it a moment ago: use that one
			}
			return nil, false, b.mapErr("create", b.sandboxName(session), err)
		}
		if err != nil {
			return nil, false, err
		}
		recreated := known != nil || (had && rec.SandboxID != "")
		rec.SandboxID, rec.Created = sb.SandboxID, time.Now()
		b.records.Save(session, rec)
		if recreated {
			b.log.Info("the session's sandbox ended; created a new one", "session", session, "sandbox_id", sb.SandboxID)
		}
		return sb, recreated, nil
	}
}

// createParams are the sandbox's settings from the configuration.
func (b *Backend) createParams(session string) *modalsdk.SandboxCreateParams {
	p := &modalsdk.SandboxCreateParams{
		CPU:          b.cfg.CPU,
		MemoryMiB:    b.cfg.MemoryMiB,
		GPU:          b.cfg.GPU,
		Timeout:      b.cfg.Timeout,
		IdleTimeout:  b.cfg.IdleTimeout,
		BlockNetwork: b.cfg.BlockNetwork,
		Name:         b.sandboxName(session),
		Tags:         map[string]string{tagOurs: "1", tagSession: session, tagOwner: b.owner},
	}
	for k, v := range b.extra.Tags {
		p.Tags[k] = v
	}
	if len(b.cfg.CIDRAllowlist) > 0 && !b.cfg.BlockNetwork {
		p.OutboundCIDRAllowlist = &modalsdk.Allowlist{Entries: append([]string(nil), b.cfg.CIDRAllowlist...)}
	}
	return p
}

// create makes the session's sandbox, from the session's snapshot when
// modal.restore_from_snapshot is on and one was taken.
func (b *Backend) create(ctx context.Context, c *modalsdk.Client, app *modalsdk.App, session string, rec record) (*modalsdk.Sandbox, error) {
	var img *modalsdk.Image
	var err error
	if b.cfg.RestoreFromSnapshot && rec.Snapshot != "" {
		img, err = c.Images.FromID(ctx, rec.Snapshot, nil)
		if err != nil {
			return nil, b.mapErr("restore snapshot", rec.Snapshot, err)
		}
		b.log.Info("restoring the session from its snapshot", "session", session, "image_id", rec.Snapshot)
	} else if img, err = b.image(ctx, c, app); err != nil {
		return nil, err
	}
	sb, err := c.Sandboxes.Create(ctx, app, img, b.createParams(session))
	if err != nil {
		var exists modalsdk.AlreadyExistsError
		if errors.As(err, &exists) {
			return nil, err
		}
		return nil, b.mapErr("create", b.sandboxName(session), err)
	}
	return sb, nil
}

// terminate ends a sandbox; one already gone is fine.
func (b *Backend) terminate(ctx context.Context, sb *modalsdk.Sandbox) error {
	if _, err := sb.Terminate(ctx, nil); err != nil && !gone(err) {
		return b.mapErr("terminate", sb.SandboxID, err)
	}
	return nil
}
