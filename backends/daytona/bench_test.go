package daytona

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

func p50ms(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}

var benchTrue = testenv.ExecTrue

// BenchmarkWarmVsToolbox measures, in one run against the fake, the per-command cost of
// `true` on a warm helper channel, over the fallback (one toolbox process session per
// command: create, execute, follow the log, delete) and the raw way: one toolbox
// /process/execute per command. All three use the same sandbox.
func BenchmarkWarmVsToolbox(b *testing.B) {
	f := newFake(b, testImage(b), time.Minute)
	state := b.TempDir()
	be := newBackend(b, f, state, nil)
	sess := open(b, be, "bench")
	defer be.Remove(context.Background(), "bench")
	for range 10 {
		benchTrue(b, sess)
	}
	fb := newBackend(b, f, state, sessionChannel)
	fsess := open(b, fb, "bench")
	for range 3 {
		benchTrue(b, fsess)
	}
	if _, _, err := be.Baseline(context.Background(), "bench", 3); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	warm := make([]time.Duration, 0, b.N)
	for range b.N {
		warm = append(warm, benchTrue(b, sess))
	}
	sessions := make([]time.Duration, 0, b.N)
	for range b.N {
		sessions = append(sessions, benchTrue(b, fsess))
	}
	_, raw, err := be.Baseline(context.Background(), "bench", b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(p50ms(warm), "channel-p50-ms")
	b.ReportMetric(p50ms(sessions), "session-p50-ms")
	b.ReportMetric(p50ms(raw), "execute-p50-ms")
	b.ReportMetric(p50ms(raw)/p50ms(warm), "ratio")
	b.ReportMetric(p50ms(sessions)/p50ms(warm), "session-vs-channel")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkWakeFromStopped is a stopped (hibernated) sandbox → the first command's result:
// the start, the helper found in place, a new PTY and the command.
func BenchmarkWakeFromStopped(b *testing.B) {
	f := newFake(b, testImage(b), time.Minute)
	f.transition = 0
	be := newBackend(b, f, b.TempDir(), nil)
	sess := open(b, be, "wake")
	defer be.Remove(context.Background(), "wake")
	benchTrue(b, sess)
	name := be.sandboxName("wake")
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		sb, err := be.api.get(context.Background(), name)
		if err != nil {
			b.Fatal(err)
		}
		if err := be.stopSandbox(context.Background(), sb.ID); err != nil {
			b.Fatal(err)
		}
		for f.state(name) != "stopped" {
			time.Sleep(10 * time.Millisecond)
		}
		b.StartTimer()
		ds = append(ds, benchTrue(b, sess))
	}
	b.ReportMetric(p50ms(ds), "p50-ms")
	b.ReportMetric(0, "ns/op")
}
