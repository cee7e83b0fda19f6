package sandbox

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends (then it returns ctx's error): the pause between two
// polls of a backend's state.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
