package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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

// takeWait bounds how long an ephemeral session waits for a member out with a task when none
// is ready and none is being reset, before it makes a container of its own: a task may run
// for long. A member being reset is waited for as long as a reset may take (resetTimeout):
// it is on its way back, and making a container costs the engine more than a reset.
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

// take hands out a ready member as it is. When none is ready but some are being made or
// reset, it waits for them (up to claimWait, resetTimeout); when some are out with a task, up
// to takeWait; nil when none comes.
func (p *pool) take(ctx context.Context) *poolEntry {
	start := time.Now()
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
		var wait time.Duration
		if p.loaned > 0 {
			wait = time.Until(start.Add(takeWait))
		}
		if p.recycling > 0 {
			wait = max(wait, time.Until(start.Add(resetTimeout)))
		}
		if p.filling > 0 {
			// As claim does: the member being made is on its way, and without this wait the
			// session would claim it by name as a container of its own, removed after one task.
			wait = max(wait, time.Until(start.Add(claimWait)))
		}
		ch := p.changed
		p.mu.Unlock()
		if wait <= 0 {
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
	made := !had && s.containerID != ""
	s.mu.Unlock()
	if made || len(s.b.ephemeralIDs(s.name)) > 0 {
		// An earlier start made (or claimed) the session's container: that one is used, not
		// a member besides it.
		return st, false, nil
	}
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
		if err := ctx.Err(); err != nil {
			// Cut short while waiting (the gate's short look at the shell state): no
			// container is made for a caller that has gone.
			return st, true, err
		}
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
// back goes back (its reset then fails if its helper is gone), any other container it made or
// claimed is removed in the background.
func (s *session) dispose() {
	if !s.ephemeral {
		return
	}
	s.mu.Lock()
	e, p, given := s.member, s.pool, s.given
	s.given = true
	s.mu.Unlock()
	if e != nil && !given {
		p.giveBack(e)
	}
	// A container made or claimed for the session is removed even when a member ran its
	// task: an earlier start may have made one and failed after (the gate's look at the
	// shell state, under its own short deadline, starts the session too).
	if e == nil || len(s.b.ephemeralIDs(s.name)) > 0 {
		s.b.removeLater(s.name)
	}
	s.b.forget(s.name)
}

// noteEphemeral records a container an ephemeral session made or claimed (by rename) before
// anything else can fail: removeLater, or else Close, removes it whatever happens next.
func (b *Backend) noteEphemeral(id, session string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ephemerals == nil {
		b.ephemerals = map[string]string{}
	}
	b.ephemerals[id] = session
}

// ephemeralIDs lists the containers noted for session.
func (b *Backend) ephemeralIDs(session string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for id, s := range b.ephemerals {
		if s == session {
			ids = append(ids, id)
		}
	}
	return ids
}

// removeAttempts is how often an ephemeral sandbox's removal is tried (a loaded engine times
// out now and then) before Close is left to try once more.
const removeAttempts = 3

// removeEphemeral removes the session's sandbox: the container by its name and every container
// noted for it by id (with its workspace volume), each forgotten once it is gone.
func (b *Backend) removeEphemeral(ctx context.Context, name string) error {
	var errs []error
	for attempt := range removeAttempts {
		errs = errs[:0]
		if err := b.Remove(ctx, name); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			errs = append(errs, err)
		}
		for _, id := range b.ephemeralIDs(name) {
			if err := b.removeContainer(ctx, id, true); err != nil {
				errs = append(errs, err)
				continue
			}
			b.mu.Lock()
			delete(b.ephemerals, id)
			b.mu.Unlock()
		}
		if len(errs) == 0 || attempt == removeAttempts-1 {
			break
		}
		if sandbox.Sleep(ctx, time.Duration(attempt+1)*time.Second) != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// removeLater removes the session's sandbox in the background (Close waits for it).
func (b *Backend) removeLater(name string) {
	remove := func() {
		ctx, cancel := cleanupContext(context.Background())
		defer cancel()
		if err := b.removeEphemeral(ctx, name); err != nil {
			b.log.Warn("remove an ephemeral sandbox (tried again when the backend closes; `hermes-sandbox gc` removes it)", "session", name, "err", err)
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

// removeEphemerals removes, at Close, the containers of ephemeral sessions that removeLater
// could not remove (or that no session's close got to).
func (b *Backend) removeEphemerals() {
	b.mu.Lock()
	left := b.ephemerals
	b.ephemerals = nil
	b.mu.Unlock()
	var wg sync.WaitGroup
	for id, session := range left {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := cleanupContext(context.Background())
			defer cancel()
			if err := b.removeContainer(ctx, id, true); err != nil {
				b.log.Warn("remove an ephemeral sandbox (`hermes-sandbox gc` removes it)", "session", session, "container", shortID(id), "err", err)
			}
		}()
	}
	wg.Wait()
}

var _ sandbox.EphemeralOpener = (*Backend)(nil)
