package sandbox

import "context"

// PoolStats describes a backend's warm pool of ready sandboxes.
type PoolStats struct {
	// Size is the number of ready sandboxes the pool keeps (docker.pool_size,
	// kubernetes.pool_size); 0 means the backend keeps no pool.
	Size int
	// Ready is how many are ready to be handed out now.
	Ready int
}

// PoolReporter is implemented by backends that can keep a warm pool (see PoolStats), so a
// service can export its size: a pool that stays below its size means sandboxes cannot be
// made as fast as they are taken. A backend whose pool lives in a service (kubernetes) asks
// it, so PoolStats takes a context and may fail.
type PoolReporter interface {
	PoolStats(ctx context.Context) (PoolStats, error)
}
