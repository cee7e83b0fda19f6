package vercel

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// report adds the p50 and p95 (in ms) of ds to the benchmark's output.
func report(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	at := func(p int) float64 {
		if len(ds) == 0 {
			return 0
		}
		return float64(ds[min(len(ds)*p/100, len(ds)-1)].Microseconds()) / 1000
	}
	b.ReportMetric(at(50), "p50-ms")
	b.ReportMetric(at(95), "p95-ms")
	b.ReportMetric(0, "ns/op")
}

func benchExec(b *testing.B, sess sandbox.Session) time.Duration {
	t := time.Now()
	res, err := sess.Exec(context.Background(), sandbox.Command{Script: "true"})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("Exec(true) = %v, %v", res, err)
	}
	return time.Since(t)
}

// BenchmarkExecWarm is the per-command overhead of `true` in a warm session: one round trip
// on the helper's channel over the PTY WebSocket.
func BenchmarkExecWarm(b *testing.B) {
	s := newSetup(b)
	be := s.backend(b, nil)
	sess, err := be.Open(context.Background(), "bench-warm")
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
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

// BenchmarkRESTCommand is the baseline: one REST command per call (POST …/cmd with wait
// and its NDJSON stream, as the SDK's runCommand does) of `true`, in the same sandbox.
func BenchmarkRESTCommand(b *testing.B) {
	s := newSetup(b)
	be := s.backend(b, nil)
	if _, _, err := be.Baseline(context.Background(), "bench-rest", 5); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	_, ds, err := be.Baseline(context.Background(), "bench-rest", b.N)
	if err != nil {
		b.Fatal(err)
	}
	report(b, ds)
}

// BenchmarkFirstResult is create → first result: Open and the first command of a new
// session (create the sandbox, wait for it to run, upload the helper with fs/write, start
// it on the PTY, run `true`).
func BenchmarkFirstResult(b *testing.B) {
	s := newSetup(b)
	be := s.backend(b, nil)
	warm, err := be.Open(context.Background(), "bench-first-warmup") // the helper is packed once per process
	if err != nil {
		b.Fatal(err)
	}
	benchExec(b, warm)
	warm.Close()
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("bench-first-%d", i)
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
