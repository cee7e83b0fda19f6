package modal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// report adds percentiles of ds (in ms) to the benchmark's output.
func report(b *testing.B, ds []time.Duration) { testenv.ReportLatency(b, ds) }

func benchExec(b *testing.B, sess sandbox.Session) time.Duration {
	t := time.Now()
	res, err := sess.Exec(context.Background(), sandbox.Command{Script: "true"})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("Exec(true) = %v, %v", res, err)
	}
	return time.Since(t)
}

// BenchmarkExecWarm is the per-command overhead of `true` on the warm helper channel (one
// stdin RPC and the streamed reply), against the fake Modal on loopback.
func BenchmarkExecWarm(b *testing.B) {
	f := newFake(b)
	be := newBackend(b, f, b.TempDir(), nil)
	sess := open(b, be, "bench-warm")
	for range 10 {
		benchExec(b, sess)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		ds = append(ds, benchExec(b, sess))
	}
	report(b, ds)
}

// BenchmarkSDKExec is the baseline: one SDK Exec per command (start, then wait), in the same
// kind of sandbox on the same fake.
func BenchmarkSDKExec(b *testing.B) {
	f := newFake(b)
	be := newBackend(b, f, b.TempDir(), nil)
	sess := open(b, be, "bench-sdk")
	benchExec(b, sess)
	if _, _, err := be.Baseline(context.Background(), "bench-sdk", 3); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	_, ds, err := be.Baseline(context.Background(), "bench-sdk", b.N)
	if err != nil {
		b.Fatal(err)
	}
	report(b, ds)
}

// BenchmarkCreateToFirstResult is a new session's first `true`: sandbox create (a container on
// the fake), helper start (uploaded once per sandbox) and the command.
func BenchmarkCreateToFirstResult(b *testing.B) {
	f := newFake(b)
	be := newBackend(b, f, b.TempDir(), nil)
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
		be.Remove(context.Background(), name)
		b.StartTimer()
	}
	report(b, ds)
}
