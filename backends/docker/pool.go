package docker

import (
	"context"
	"fmt"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// The warm pool keeps docker.pool_size hardened containers created and started, each with a
// helper already attached, so a new session's first command costs a rename and one round
// trip. Labels cannot change after creation, so pool containers are named
// hermes-pool-<scope>-<random> and a session claims one by renaming it to the session's
// container name: the engine renames atomically, so a failed rename means the name was taken
// (another process made the session's container meanwhile) or the container is gone.
//
// One goroutine, started by the first Open and stopped by Backend.Close, owns the pool: it
// creates containers, replenishes after claims, and removes discarded ones. Close waits for
// it, then removes every unclaimed container.
type pool struct {
	b    *Backend
	size int

	mu       sync.Mutex
	ready    []*poolEntry  // guarded by mu
	trash    []*poolEntry  // guarded by mu
	closed   bool          // guarded by mu
	changed  chan struct{} // guarded by mu; closed and replaced whenever ready changes
	kick     chan struct{}
	cancel   context.CancelFunc
	done     chan struct{}
	failures int   // guarded by mu
	lastErr  error // guarded by mu; why the last container could not be made; nil after a success
	filling  int   // guarded by mu; containers being made now

	// Members lent to ephemeral sessions come back after a reset (recycle.go): the filler
	// does not replace them, and a take waits for one coming back rather than make one.
	loaned    int            // guarded by mu; out with an ephemeral session
	recycling int            // guarded by mu; being reset
	resets    sync.WaitGroup // the resets under way; close waits for them
}

type poolEntry struct {
	id, name string
	client   *agent.Client
	// fresh is the container's fingerprint when new (agent.ResetReply), and recyclable says
	// its probe found it can be made so again; a member that is not goes after one task.
	fresh      []string
	recyclable bool
	reused     bool // it ran a task before: its cgroup's counters are not zero
}

func (b *Backend) getPool() *pool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pool
}

// startPool starts the warm pool once, if docker.pool_size asks for one.
func (b *Backend) startPool() {
	if b.cfg.PoolSize <= 0 {
		return
	}
	b.poolOnce.Do(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		p := &pool{b: b, size: b.cfg.PoolSize, changed: make(chan struct{}), kick: make(chan struct{}, 1),
			cancel: cancel, done: make(chan struct{})}
		b.pool = p
		go p.run(ctx)
	})
}

// Prewarm starts the warm pool (if docker.pool_size is set) and waits until it is full, ctx
// ends, or a container cannot be made (its error is returned; the pool keeps retrying).
func (b *Backend) Prewarm(ctx context.Context) error {
	if b.cfg.PoolSize <= 0 {
		return nil
	}
	if err := b.prepare(ctx); err != nil {
		return err
	}
	b.startPool()
	p := b.getPool()
	if p == nil {
		return fmt.Errorf("docker: prewarm: backend closed")
	}
	for {
		p.mu.Lock()
		n, ch, lastErr := len(p.ready), p.changed, p.lastErr
		p.mu.Unlock()
		if n >= p.size {
			return nil
		}
		if lastErr != nil {
			return lastErr
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("docker: prewarm: %d of %d containers ready: %w", n, p.size, ctx.Err())
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *pool) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *pool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *pool) run(ctx context.Context) {
	defer close(p.done)
	for {
		p.emptyTrash(ctx)
		var retry <-chan time.Time
		for ctx.Err() == nil {
			p.mu.Lock()
			need := p.size - len(p.ready) - p.loaned - p.recycling
			if need > 0 {
				p.filling++
			}
			p.mu.Unlock()
			if need <= 0 {
				break
			}
			e, err := p.fill(ctx)
			if err != nil {
				p.mu.Lock()
				p.filling--
				p.lastErr = err
				p.notifyLocked()
				p.mu.Unlock()
				p.failures++
				wait := min(time.Duration(p.failures)*time.Second, 30*time.Second)
				p.b.log.Warn("warm pool: cannot create a container; retrying", "err", err, "in", wait)
				retry = time.After(wait)
				break
			}
			p.failures = 0
			p.mu.Lock()
			p.filling--
			p.lastErr = nil
			p.ready = append(p.ready, e)
			p.notifyLocked()
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
			// A claim just handed out a container: let the new session's first commands
			// run before loading the engine (and two cores) with the replacement.
			select {
			case <-ctx.Done():
				return
			case <-time.After(refillDelay):
			}
		case <-retry:
		}
	}
}

// claimWait bounds how long a claim waits for a pool container being made when none is ready:
// as long as making one may take (fill's own bound), since a session's own container would
// be made by the same loaded engine and take as long.
const claimWait = fillTimeout

// fillTimeout bounds the making of one pool container.
const fillTimeout = 2 * time.Minute

// refillDelay is how long the pool waits after a claim before replacing the container.
const refillDelay = 250 * time.Millisecond

// fill creates one pool container with its helper. The work is not cut short by ctx, so a
// half-made container is never lost; if the pool was closed meanwhile, it is removed.
func (p *pool) fill(ctx context.Context) (*poolEntry, error) {
	b := p.b
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fillTimeout)
	defer cancel()
	if err := b.prepare(cctx); err != nil {
		return nil, err
	}
	name := "hermes-pool-" + b.scope + "-" + sandbox.RandomHex(5)
	id, err := b.create(cctx, name, rolePool, "")
	if err != nil {
		return nil, err
	}
	client, err := b.startHelper(cctx, id, name)
	if err != nil {
		b.removeContainer(cctx, id, true)
		return nil, err
	}
	// One command warms the helper (its first run saves the session state, starts threads),
	// so the claiming session's first command costs what any later one does.
	if _, err := client.Run(cctx, agent.RunRequest{Script: "true"}, nil, nil, nil); err != nil {
		client.Close()
		b.removeContainer(cctx, id, true)
		return nil, err
	}
	e := &poolEntry{id: id, name: name, client: client}
	p.probe(cctx, e)
	if ctx.Err() != nil {
		p.remove(cctx, e)
		return nil, ctx.Err()
	}
	return e, nil
}

// claim renames a ready pool container to name and returns it, or nil when none is ready or
// the name is taken.
//
// When none is ready but one is being made, it waits for that one (up to claimWait, or until
// the fill fails): the container is already on its way, while a session's own would start from
// nothing.
func (p *pool) claim(ctx context.Context, name string) *poolEntry {
	deadline := time.Now().Add(claimWait)
	for {
		p.mu.Lock()
		if !p.closed && len(p.ready) == 0 && p.filling > 0 && time.Now().Before(deadline) {
			ch := p.changed
			p.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil
			case <-time.After(time.Until(deadline)):
			}
			continue
		}
		if p.closed || len(p.ready) == 0 {
			p.mu.Unlock()
			p.poke()
			return nil
		}
		e := p.ready[0]
		p.ready = p.ready[1:]
		p.notifyLocked()
		p.mu.Unlock()
		p.poke()
		select {
		case <-e.client.Done():
			p.discard(e)
			continue
		default:
		}
		_, err := p.b.cli.ContainerRename(ctx, e.id, client.ContainerRenameOptions{NewName: name})
		if err == nil {
			return e
		}
		if cerrdefs.IsConflict(err) {
			// The session's container exists after all: keep this one for someone else
			// (unless the pool closed meanwhile).
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				p.removeNow(e)
				return nil
			}
			p.ready = append(p.ready, e)
			p.notifyLocked()
			p.mu.Unlock()
			return nil
		}
		p.b.log.Debug("warm pool: claim failed", "container", e.name, "err", err)
		p.discard(e)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// discard hands e to the pool's goroutine for removal, or removes it here once the pool is
// closed: close has already collected the trash, so a claim that fails while the pool
// closes (its caller cancelled at shutdown) would otherwise leave e behind.
func (p *pool) discard(e *poolEntry) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.removeNow(e)
		return
	}
	p.trash = append(p.trash, e)
	p.mu.Unlock()
	p.poke()
}

// removeNow removes e with a fresh cleanup deadline, whatever its caller's context.
func (p *pool) removeNow(e *poolEntry) {
	ctx, cancel := cleanupContext(context.Background())
	defer cancel()
	p.remove(ctx, e)
}

func (p *pool) emptyTrash(ctx context.Context) {
	p.mu.Lock()
	trash := p.trash
	p.trash = nil
	p.mu.Unlock()
	for _, e := range trash {
		cctx, cancel := cleanupContext(ctx)
		p.remove(cctx, e)
		cancel()
	}
}

func (p *pool) remove(ctx context.Context, e *poolEntry) {
	e.client.Close()
	if err := p.b.removeContainer(ctx, e.id, true); err != nil {
		p.b.log.Warn("warm pool: remove container", "container", e.name, "err", err)
	}
}

// close stops the owner goroutine, waits for it, and removes every unclaimed container.
func (p *pool) close() error {
	p.cancel()
	<-p.done
	p.mu.Lock()
	p.closed = true // from here on a member given back is removed, not reset
	p.mu.Unlock()
	p.resets.Wait()
	p.mu.Lock()
	left := append(p.ready, p.trash...)
	p.ready, p.trash = nil, nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range left {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.removeNow(e)
		}()
	}
	wg.Wait()
	return nil
}
