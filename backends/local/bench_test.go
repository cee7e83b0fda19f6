//go:build !windows

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

// confinementModes are the confinements the benchmarks below alternate.
var confinementModes = []struct {
	name string
	sec  local.Section
}{
	{"off", local.Section{Confine: config.ConfineOff}},
	{"landlock", local.Section{Confine: config.ConfineAuto, NoNamespaces: true}},
	{"namespaces", local.Section{Confine: config.ConfineAuto}},
	{"strict-none", local.Section{Confine: config.ConfineStrict}},
}

// BenchmarkConfinement is the per-command cost of `true` in a warm session under each
// confinement, measured in one run and alternating (off, Landlock alone, namespaces with the
// host's network, strict with network none, off, …), so a noisy machine weighs on every mode
// alike. It reports each mode's p50 and p95, and the fork/exec baseline's, in milliseconds.
func BenchmarkConfinement(b *testing.B) {
	modes := confinementModes
	ctx := context.Background()
	work := b.TempDir()
	sessions := make([]sandbox.Session, len(modes))
	for i, m := range modes {
		cfg := config.NewConfig()
		cfg.Terminal.Cwd = work
		be, err := local.NewWith(m.sec, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: b.TempDir(), Environ: []string{"PATH=/usr/bin:/bin"}}))
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		if sessions[i], err = be.Open(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		defer sessions[i].Close()
		for k := 0; k < 5; k++ {
			if res, err := sessions[i].Exec(ctx, sandbox.Command{Script: "true"}); err != nil || res.ExitCode != 0 {
				b.Fatalf("%s: %v %v", m.name, res, err)
			}
		}
	}
	ds := make([][]time.Duration, len(modes)+1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k, s := range sessions {
			t := time.Now()
			if res, err := s.Exec(ctx, sandbox.Command{Script: "true"}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
			ds[k] = append(ds[k], time.Since(t))
		}
		t := time.Now()
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
		ds[len(modes)] = append(ds[len(modes)], time.Since(t))
	}
	b.StopTimer()
	for k, d := range ds {
		name := "fork-exec"
		if k < len(modes) {
			name = modes[k].name
		}
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(d[len(d)*95/100].Microseconds())/1000, name+"-p95-ms")
	}
}

// BenchmarkFirstCommand is a new session's first `true` (the namespaces made, or the helper
// started in-process), then its removal, alternating off, Landlock alone, namespaces and
// strict in one run. It reports each mode's p50 in milliseconds.
func BenchmarkFirstCommand(b *testing.B) {
	modes := confinementModes
	ctx := context.Background()
	work := b.TempDir()
	backends := make([]sandbox.Backend, len(modes))
	for i, m := range modes {
		cfg := config.NewConfig()
		cfg.Terminal.Cwd = work
		be, err := local.NewWith(m.sec, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: b.TempDir(), Environ: []string{"PATH=/usr/bin:/bin"}}))
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		backends[i] = be
	}
	ds := make([][]time.Duration, len(modes))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k, be := range backends {
			name := fmt.Sprintf("first%d", i)
			t := time.Now()
			sess, err := be.Open(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			if res, err := sess.Exec(ctx, sandbox.Command{Script: "true"}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
			ds[k] = append(ds[k], time.Since(t))
			sess.Close()
			if err := be.(sandbox.SessionManager).Remove(ctx, name); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	for k, d := range ds {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, modes[k].name+"-p50-ms")
	}
}
