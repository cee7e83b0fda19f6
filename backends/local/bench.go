//go:build !windows

package local

import (
	"context"
	"os/exec"
	"time"
)

// Baseline times plain fork/exec of `sh -c true`, the cost any local runner pays.
func (b *Backend) Baseline(ctx context.Context, session string, n int) (string, []time.Duration, error) {
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := exec.CommandContext(ctx, "/bin/sh", "-c", "true").Run(); err != nil {
			return "", nil, err
		}
		ds = append(ds, time.Since(start))
	}
	return "fork/exec sh -c true", ds, nil
}
