//go:build unix

package ssh

import (
	"slices"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// reportPercentiles adds p50 and p95 in milliseconds to the benchmark's output.
func reportPercentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*95/100].Microseconds())/1000, "p95-ms")
}

func benchExecWarm(b *testing.B, o Options) {
	d := newTestSSHD(b)
	be := d.backend(b, o)
	sess, err := be.Open(testCtx(b, 60*time.Second), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	ctx := testCtx(b, 10*time.Minute)
	for i := 0; i < 20; i++ { // warm up
		if _, err := sess.Exec(ctx, sandbox.Command{Script: "true"}); err != nil {
			b.Fatal(err)
		}
	}
	var ds []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		res, err := sess.Exec(ctx, sandbox.Command{Script: "true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Exec(true) = %+v, %v", res, err)
		}
		ds = append(ds, time.Since(t))
	}
	reportPercentiles(b, ds)
}

// BenchmarkExecWarm is a `true` through a warm session's helper channel.
func BenchmarkExecWarm(b *testing.B) { benchExecWarm(b, Options{}) }

// BenchmarkExecWarmShell is the same through the plain-shell protocol.
func BenchmarkExecWarmShell(b *testing.B) { benchExecWarm(b, Options{ForceShell: true}) }

// BenchmarkBaselineNewSession is the raw way: a new SSH session and Run("true") on an open
// connection, as Baseline measures it.
func BenchmarkBaselineNewSession(b *testing.B) {
	d := newTestSSHD(b)
	be := d.backend(b, Options{})
	ctx := testCtx(b, 10*time.Minute)
	if err := be.Check(ctx); err != nil {
		b.Fatal(err)
	}
	h, err := be.host()
	if err != nil {
		b.Fatal(err)
	}
	defer h.release()
	cl, err := h.client(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var ds []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		s, err := cl.NewSession()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Run("true"); err != nil {
			b.Fatal(err)
		}
		s.Close()
		ds = append(ds, time.Since(t))
	}
	reportPercentiles(b, ds)
}

// BenchmarkFirstCommand is a new process's first command: dial, authenticate, start the
// (already installed) helper, run `true`.
func BenchmarkFirstCommand(b *testing.B) {
	d := newTestSSHD(b)
	{
		// Install the helper and record the host key once, outside the measurement.
		be := d.backend(b, Options{})
		s, err := be.Open(testCtx(b, 60*time.Second), "first")
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
		be.Close()
	}
	ctx := testCtx(b, 10*time.Minute)
	var ds []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		cfg := d.config()
		be, err := NewWithOptions(cfg.SSH, d.factory(b, cfg, nil), Options{SSHConfig: "none"})
		if err != nil {
			b.Fatal(err)
		}
		s, err := be.Open(ctx, "first")
		if err != nil {
			b.Fatal(err)
		}
		if res, err := s.Exec(ctx, sandbox.Command{Script: "true"}); err != nil || res.ExitCode != 0 {
			b.Fatalf("Exec(true) = %+v, %v", res, err)
		}
		ds = append(ds, time.Since(t))
		s.Close()
		be.Close()
	}
	reportPercentiles(b, ds)
}
