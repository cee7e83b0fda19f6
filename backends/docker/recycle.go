package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Ephemeral sessions and the warm pool. An ephemeral session (OpenEphemeral: `exec
// --ephemeral` in a session owner) takes a pool member as it is, without a rename: nobody
// finds it again by name. When the session closes, the member's helper resets the container
// (agent.ResetRequest): it kills every process but itself and PID 1 (the idle helper, which
// like the helper refuses to be traced), removes System V IPC objects, empties the
// workspace, /tmp, /dev/shm and /dev/mqueue, restores the fresh session state (cwd, exports),
// and fingerprints every writable mount. The member goes back to the pool only if nothing
// was left and the fingerprint equals the one its probe took when it was new; anything else
// (a problem, a difference, a helper that does not answer in time, a container that stopped)
// removes it. A member costs the engine one container for many tasks instead of one each.
//
// Only sandboxes whose only writable places are private to them are reset: a read-only root,
// no network (an allowlist's relay and an open network's connections are not reset) and not
// privileged. Pool members are then made without the engine's init, so that PID 1 is the
// idle helper, which refuses tracing: a task runs as the helper's user, and could otherwise
// plant code in docker-init that outlives the reset.

// takeWait bounds how long an ephemeral session waits for a member coming back from a task or
// a reset when none is ready, before it makes a container of its own.
const takeWait = time.Second

// resetTimeout bounds a reset; a member whose helper takes longer is removed.
const resetTimeout = 30 * time.Second

// recycles reports whether pool members may be reset and reused after an ephemeral session.
func (b *Backend) recycles() bool {
	return b.cfg.ReadOnlyRootfs && !b.cfg.Privileged && b.network() == config.NetworkNone
}

// resetPlan is what a reset empties (the workspace unless docker.volumes mounts one there,
// /tmp, /dev/shm, /dev/mqueue; $HOME is the workspace) and what it leaves out of the
// fingerprint (docker.volumes, shared on purpose).
func (b *Backend) resetPlan() agent.ResetRequest {
	vols, _ := parseVolumes(b.cfg.Volumes, b.home())
	req := agent.ResetRequest{Wipe: []string{"/tmp", "/dev/shm", "/dev/mqueue"}}
	if !b.workspaceMounted(vols) {
		req.Wipe = append([]string{workdir(b.cfg)}, req.Wipe...)
	}
	for _, v := range vols {
		req.Skip = append(req.Skip, v.target)
	}
	return req
}

// probe takes a new member's fingerprint; a member it cannot take is not reused.
func (p *pool) probe(ctx context.Context, e *poolEntry) {
	if !p.b.recycles() {
		return
	}
	req := p.b.resetPlan()
	req.Probe = true
	rep, err := e.client.Reset(ctx, req)
	switch {
	case err != nil:
		p.b.log.Info("warm pool: a member cannot be reset; it is removed after one task", "container", e.name, "err", err)
	case len(rep.Problems) > 0:
		p.b.log.Info("warm pool: a member cannot be made fresh again; it is removed after one task", "container", e.name, "problems", rep.Problems)
	default:
		e.fresh, e.recyclable = rep.Fingerprint, true
	}
}

// take hands out a ready member as it is. When none is ready but some are out with a task or
// being reset, it waits up to takeWait for one; nil when none comes.
func (p *pool) take(ctx context.Context) *poolEntry {
	deadline := time.Now().Add(takeWait)
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil
		}
		if len(p.ready) > 0 {
			e := p.ready[0]
			p.ready = p.ready[1:]
			p.notifyLocked()
			select {
			case <-e.client.Done():
				p.trash = append(p.trash, e)
				p.mu.Unlock()
				p.poke()
				continue
			default:
			}
			if e.recyclable {
				p.loaned++
			}
			p.mu.Unlock()
			if !e.recyclable {
				p.poke() // it will not come back: replace it
			}
			return e
		}
		back := p.loaned + p.recycling
		ch := p.changed
		p.mu.Unlock()
		wait := time.Until(deadline)
		if back == 0 || wait <= 0 {
			p.poke()
			return nil
		}
		select {
		case <-ch:
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
	}
}

// giveBack takes back a member that take handed out: it is reset in the background and
// reused, or removed.
func (p *pool) giveBack(e *poolEntry) {
	p.mu.Lock()
	if e.recyclable {
		p.loaned--
	}
	if p.closed || !e.recyclable {
		p.notifyLocked()
		p.mu.Unlock()
		p.discard(e)
		return
	}
	p.recycling++
	p.resets.Add(1) // under mu while open: close waits only after it has marked the pool closed
	p.mu.Unlock()
	go func() {
		defer p.resets.Done()
		p.recycle(e)
	}()
}

// recycle resets e and puts it back among the ready members, or removes it.
func (p *pool) recycle(e *poolEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
	defer cancel()
	t0 := time.Now()
	rep, err := e.client.Reset(ctx, p.b.resetPlan())
	why := ""
	switch {
	case err != nil:
		why = err.Error()
	case len(rep.Problems) > 0:
		why = fmt.Sprint(rep.Problems)
	case !slices.Equal(rep.Fingerprint, e.fresh):
		why = "differs from new: " + fingerprintDiff(e.fresh, rep.Fingerprint)
	}
	p.mu.Lock()
	p.recycling--
	p.notifyLocked()
	if why == "" && !p.closed && len(p.ready) < p.size {
		e.reused = true
		p.ready = append(p.ready, e)
		p.mu.Unlock()
		p.b.log.Debug("warm pool: member reset", "container", e.name, "ms", time.Since(t0).Milliseconds())
		return
	}
	p.mu.Unlock()
	if why != "" {
		p.b.log.Info("warm pool: a used member could not be made fresh; removing it", "container", e.name, "why", why)
	}
	p.discard(e)
}

// fingerprintDiff names a few lines that differ between two fingerprints.
func fingerprintDiff(was, now []string) string {
	var out []string
	for _, l := range now {
		if !slices.Contains(was, l) {
			out = append(out, "+"+l)
		}
	}
	for _, l := range was {
		if !slices.Contains(now, l) {
			out = append(out, "-"+l)
		}
	}
	if len(out) > 6 {
		out = append(out[:6], fmt.Sprintf("(and %d more)", len(out)-6))
	}
	return fmt.Sprint(out)
}

// OpenEphemeral opens a session on a sandbox of its own (sandbox.EphemeralOpener): a warm
// pool member where one is ready (or comes back within takeWait), else a container made for
// it. Closing the session disposes of it: a member is reset and reused (or removed), a
// container of its own is removed.
func (b *Backend) OpenEphemeral(ctx context.Context, name string) (sandbox.Session, error) {
	return b.open(name, true)
}

// startMember starts an ephemeral session on a pool member; ok is false when it is to get a
// container of its own instead.
func (s *session) startMember(ctx context.Context) (st channel.Started, ok bool, err error) {
	s.mu.Lock()
	had := s.member != nil
	s.mu.Unlock()
	if had {
		// A member has no name to find it again by, and an ephemeral sandbox is not made
		// anew behind its task's back.
		return st, true, &sandbox.Error{Backend: Name, Op: "start", ID: s.name,
			Err: fmt.Errorf("the ephemeral sandbox's helper stream was lost: %w", sandbox.ErrUnavailable)}
	}
	p := s.b.getPool()
	if p == nil || !s.b.recycles() {
		return st, false, nil
	}
	e := p.take(ctx)
	if e == nil {
		return st, false, nil
	}
	var n int64 // a new member's cgroup has killed nothing yet
	if e.reused {
		n, _ = s.b.readOOMCount(ctx, e.client)
	}
	s.mu.Lock()
	s.member, s.pool = e, p
	s.containerID = e.id
	s.oomCount = n
	s.mu.Unlock()
	return channel.Started{Client: e.client}, true, nil
}

// detach is the channel's Detach: the member's helper goes back to the pool with it.
func (s *session) detach(c *agent.Client) bool {
	s.mu.Lock()
	e, p := s.member, s.pool
	mine := e != nil && c == e.client && !s.given
	if mine {
		s.given = true
	}
	s.mu.Unlock()
	if mine {
		p.giveBack(e)
	}
	return mine
}

// dispose ends an ephemeral session's sandbox when the session closes: a member not yet given
// back goes back (its reset then fails if its helper is gone), a container of its own is
// removed in the background.
func (s *session) dispose() {
	if !s.ephemeral {
		return
	}
	s.mu.Lock()
	e, p, given := s.member, s.pool, s.given
	s.given = true
	s.mu.Unlock()
	switch {
	case e != nil && !given:
		p.giveBack(e)
	case e == nil:
		s.b.removeLater(s.name)
	}
	s.b.forget(s.name)
}

// removeLater removes the session's sandbox in the background (Close waits for it).
func (b *Backend) removeLater(name string) {
	remove := func() {
		ctx, cancel := cleanupContext(context.Background())
		defer cancel()
		if err := b.Remove(ctx, name); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			b.log.Warn("remove an ephemeral sandbox (`hermes-sandbox gc` removes it)", "session", name, "err", err)
		}
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		remove()
		return
	}
	b.bg.Add(1) // under mu while open: Close waits only after it has marked the backend closed
	b.mu.Unlock()
	go func() {
		defer b.bg.Done()
		remove()
	}()
}

var _ sandbox.EphemeralOpener = (*Backend)(nil)
