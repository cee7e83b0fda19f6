//go:build unix

package docker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

var benchExec = testenv.ExecTrue

// BenchmarkExecWarm is the per-command overhead of `true` in a warm session.
func BenchmarkExecWarm(b *testing.B) {
	be := newBackend(b, nil)
	testenv.BenchWarm(b, open(b, be, "bench-warm"), 20)
}

// BenchmarkRawExec is the baseline: a raw Engine API exec (create, attach, inspect) of
// `true` in the same kind of container.
func BenchmarkRawExec(b *testing.B) {
	be := newBackend(b, nil)
	sess := open(b, be, "bench-raw")
	benchExec(b, sess)
	testenv.BenchBaseline(b, be, "bench-raw", 5)
}

// BenchmarkColdStart is create hardened sandbox → first result, without a pool.
func BenchmarkColdStart(b *testing.B) {
	be := newBackend(b, nil)
	warm := open(b, be, "bench-cold-warmup") // the engine has seen the image and the helper
	benchExec(b, warm)
	testenv.BenchFirstResult(b, be, "bench-cold", nil)
}

// BenchmarkColdStartNoDiskLimit is BenchmarkColdStart with docker.disk_limit 0: the
// workspace is a plain volume instead of a loop-mounted file system, the baseline for the
// limit's cost.
func BenchmarkColdStartNoDiskLimit(b *testing.B) {
	be := newBackend(b, func(c *config.Config) { c.Docker.DiskLimit = 0 })
	warm := open(b, be, "bench-cold-warmup")
	benchExec(b, warm)
	testenv.BenchFirstResult(b, be, "bench-cold", nil)
}

// BenchmarkPoolStart is a new session's first result when the warm pool has a container.
func BenchmarkPoolStart(b *testing.B) {
	be := newBackend(b, func(c *config.Config) { c.Docker.PoolSize = 2 })
	testenv.BenchFirstResult(b, be, "bench-pool", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := be.Prewarm(ctx); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkConcurrent32 runs `true` in 32 warm sessions at once; the p95 is the figure.
func BenchmarkConcurrent32(b *testing.B) {
	const n = 32
	be := newBackend(b, nil)
	sessions := make([]sandbox.Session, n)
	var wg sync.WaitGroup
	for i := range n {
		sessions[i] = open(b, be, fmt.Sprintf("bench-c%02d", i))
		wg.Add(1)
		go func() { defer wg.Done(); benchExec(b, sessions[i]) }()
	}
	wg.Wait()
	var mu sync.Mutex
	ds := make([]time.Duration, 0, b.N)
	per := (b.N + n - 1) / n
	b.ResetTimer()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				d := benchExec(b, sessions[i])
				mu.Lock()
				ds = append(ds, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	testenv.ReportLatency(b, ds)
}
