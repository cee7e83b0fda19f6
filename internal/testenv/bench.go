package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// ExecTrue runs `true` in sess and returns how long it took. It reports a failure with
// Errorf, so other goroutines may call it.
func ExecTrue(b *testing.B, sess sandbox.Session) time.Duration {
	t := time.Now()
	res, err := sess.Exec(context.Background(), sandbox.Command{Script: "true"})
	if err != nil || res.ExitCode != 0 {
		b.Errorf("Exec(true) = %v, %v", res, err)
	}
	return time.Since(t)
}

// BenchWarm runs `true` warmup times in sess, then b.N times timed, and reports the latencies.
func BenchWarm(b *testing.B, sess sandbox.Session, warmup int) {
	for range warmup {
		ExecTrue(b, sess)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		ds = append(ds, ExecTrue(b, sess))
	}
	ReportLatency(b, ds)
}

// BenchBaseline reports the backend's raw way of running `true` (its Baseline) in session,
// after warmup untimed runs.
func BenchBaseline(b *testing.B, be sandbox.Baseliner, session string, warmup int) {
	if _, _, err := be.Baseline(context.Background(), session, warmup); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	_, ds, err := be.Baseline(context.Background(), session, b.N)
	if err != nil {
		b.Fatal(err)
	}
	ReportLatency(b, ds)
}

// BenchFirstResult times Open plus the first command of a new session, b.N times; prepare
// (untimed) runs before each one. Each session is removed, untimed, afterwards.
func BenchFirstResult(b *testing.B, be interface {
	sandbox.Backend
	sandbox.SessionManager
}, prefix string, prepare func()) {
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
		ExecTrue(b, sess)
		ds = append(ds, time.Since(t))
		b.StopTimer()
		sess.Close()
		if err := be.Remove(context.Background(), name); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	ReportLatency(b, ds)
}
