package local_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// BenchmarkExecTrue is the per-command cost of `true` in a warm local session: a plain
// command, which the helper runs without a shell.
func BenchmarkExecTrue(b *testing.B) { benchScript(b, "true") }

// BenchmarkExecScript is the cost of a script that needs the shell (`:` is a builtin).
func BenchmarkExecScript(b *testing.B) { benchScript(b, ":") }

func benchScript(b *testing.B, script string) {
	for _, shell := range []config.Shell{config.ShellSh, config.ShellBash} {
		b.Run(string(shell), func(b *testing.B) {
			cfg := config.NewConfig()
			cfg.Terminal.Shell = shell
			be, err := local.New(cfg.BackendOptions(sandbox.FactoryOptions{StateDir: b.TempDir(), Environ: []string{"PATH=/usr/bin:/bin"}}))
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			sess, err := be.Open(context.Background(), "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer sess.Close()
			ctx := context.Background()
			for i := 0; i < 5; i++ {
				sess.Exec(ctx, sandbox.Command{Script: script})
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := sess.Exec(ctx, sandbox.Command{Script: script})
				if err != nil || res.ExitCode != 0 {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// BenchmarkForkExecBaseline is plain fork/exec of `sh -c true`, for comparison.
func BenchmarkForkExecBaseline(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConcurrent64 runs 64 sessions at once: "saturated" has every session send its next
// command as soon as the last one returns (a closed loop that keeps both cores busy, so
// latency is queueing); "paced" has each session send one command every 50 ms, like agents
// that think between commands (about 1,300 commands a second in all). Both report the p50
// and p95 latency of one command.
func BenchmarkConcurrent64(b *testing.B) {
	for _, mode := range []struct {
		name  string
		every time.Duration
	}{{"saturated", 0}, {"paced", 50 * time.Millisecond}} {
		b.Run(mode.name, func(b *testing.B) { concurrent(b, 64, mode.every) })
	}
}

func concurrent(b *testing.B, n int, every time.Duration) {
	cfg := config.NewConfig()
	be, err := local.New(cfg.BackendOptions(sandbox.FactoryOptions{StateDir: b.TempDir(), Environ: []string{"PATH=/usr/bin:/bin"}}))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	ctx := context.Background()
	sessions := make([]sandbox.Session, n)
	for i := range sessions {
		if sessions[i], err = be.Open(ctx, fmt.Sprintf("c%d", i)); err != nil {
			b.Fatal(err)
		}
		defer sessions[i].Close()
		if _, err := sessions[i].Exec(ctx, sandbox.Command{Script: "true"}); err != nil {
			b.Fatal(err)
		}
	}
	var mu sync.Mutex
	var ds []time.Duration
	b.ResetTimer()
	var wg sync.WaitGroup
	per := max(1, b.N/len(sessions))
	for k, s := range sessions {
		wg.Add(1)
		go func(k int, s sandbox.Session) {
			defer wg.Done()
			var tick *time.Ticker
			if every > 0 {
				time.Sleep(every * time.Duration(k) / time.Duration(n)) // spread the phases
				tick = time.NewTicker(every)
				defer tick.Stop()
			}
			for i := 0; i < per; i++ {
				if tick != nil {
					<-tick.C
				}
				t := time.Now()
				res, err := s.Exec(ctx, sandbox.Command{Script: "true"})
				if err != nil || res.ExitCode != 0 {
					b.Error(res, err)
					return
				}
				mu.Lock()
				ds = append(ds, time.Since(t))
				mu.Unlock()
			}
		}(k, s)
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*95/100].Microseconds())/1000, "p95-ms")
}
