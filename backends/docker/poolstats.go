package docker

import (
	"context"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// PoolStats reports the warm pool: docker.pool_size, and the containers ready now (none
// before the first Open starts the pool).
func (b *Backend) PoolStats(context.Context) (sandbox.PoolStats, error) {
	st := sandbox.PoolStats{Size: max(b.cfg.PoolSize, 0)}
	if p := b.getPool(); p != nil {
		p.mu.Lock()
		st.Ready = len(p.ready)
		p.mu.Unlock()
	}
	return st, nil
}

var _ sandbox.PoolReporter = (*Backend)(nil)

// RecordsOwners says the backend labels the containers of an ephemeral process (labelOwner)
// and of a warm pool (labelPool) with their owner process.
func (b *Backend) RecordsOwners() bool { return true }

var _ sandbox.OwnerRecorder = (*Backend)(nil)
