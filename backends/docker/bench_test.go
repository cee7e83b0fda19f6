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

// report adds percentiles of ds (in ms) to the benchmark's output.
func report(b *testing.B, ds []time.Duration) { testenv.ReportLatency(b, ds) }

func benchExec(b *testing.B, sess sandbox.Session) time.Duration {
	t := time.Now()
	res, err := sess.Exec(context.Background(), sandbox.Command{Script: "true"})
	if err != nil || res.ExitCode != 0 {
		b.Errorf("Exec(true) = %v, %v", res, err) // Errorf: callers may be other goroutines
	}
	return time.Since(t)
}

// BenchmarkExecWarm is the per-command overhead of `true` in a warm session.
func BenchmarkExecWarm(b *testing.B) {
	be := newBackend(b, nil)
	sess := open(b, be, "bench-warm")
	for range 20 {
		benchExec(b, sess)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		ds = append(ds, benchExec(b, sess))
	}
	report(b, ds)
}

// BenchmarkRawExec is the baseline: a raw Engine API exec (create, attach, inspect) of
// `true` in the same kind of container.
func BenchmarkRawExec(b *testing.B) {
	be := newBackend(b, nil)
	sess := open(b, be, "bench-raw")
	benchExec(b, sess)
	if _, _, err := be.Baseline(context.Background(), "bench-raw", 5); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	_, ds, err := be.Baseline(context.Background(), "bench-raw", b.N)
	if err != nil {
		b.Fatal(err)
	}
	report(b, ds)
}

// BenchmarkColdStart is create hardened sandbox → first result, without a pool.
func BenchmarkColdStart(b *testing.B) {
	be := newBackend(b, nil)
	warm := open(b, be, "bench-cold-warmup") // the engine has seen the image and the helper
	benchExec(b, warm)
	benchFirstResult(b, be, "bench-cold", nil)
}

// BenchmarkPoolStart is a new session's first result when the warm pool has a container.
func BenchmarkPoolStart(b *testing.B) {
	be := newBackend(b, func(c *config.Config) { c.Docker.PoolSize = 2 })
	benchFirstResult(b, be, "bench-pool", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := be.Prewarm(ctx); err != nil {
			b.Fatal(err)
		}
	})
}

// benchFirstResult times Open plus the first command of a new session, b.N times; prepare
// (untimed) runs before each one. Each session is removed, untimed, afterwards.
func benchFirstResult(b *testing.B, be *Backend, prefix string, prepare func()) {
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if prepare != nil {
			b.StopTimer()
			prepare()
			b.StartTimer()
		}
		name := fmt.Sprintf("%s-%d", prefix, i)
		t := time.Now()
		sess, err := be.Open(context.Background(), name)
		if err != nil {
			b.Fatal(err)
		}
		benchExec(b, sess)
		ds = append(ds, time.Since(t))
		b.StopTimer()
		sess.Close()
		if err := be.Remove(context.Background(), name); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	report(b, ds)
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
	report(b, ds)
}
