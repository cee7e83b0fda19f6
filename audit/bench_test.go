package audit

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// benchOps returns the record of a call as one record was written before intents, and the
// intent+result pair that replaces it.
func benchOps(ctx context.Context) (Record, func(*Log) error) {
	code := 0
	intent := Record{Session: "bench", Backend: "local", Tool: ToolExec, Command: "echo hello world",
		Verdict: "safe", Decision: DecisionAllowed, Approver: "policy"}
	result := Record{Session: "bench", Backend: "local", Tool: ToolExec, ExitCode: &code, DurationMS: 1.5,
		StdoutBytes: 12, Excerpt: "hello world\n"}
	old := intent
	old.ExitCode, old.DurationMS, old.Excerpt = &code, 1.5, "hello world\n"
	return old, func(l *Log) error {
		seq, err := l.Intent(ctx, intent)
		if err == nil {
			err = l.Result(ctx, seq, result)
		}
		return err
	}
}

// BenchmarkPair is the audit cost of one call: an intent and its result, each written and
// fdatasync'd, in a sealed log (MAC, key evolution, seal) and in an unsealed one, next to
// the single unsealed append of before intents (the raw baseline). It reports p50 and p95.
func BenchmarkPair(b *testing.B) {
	ctx := context.Background()
	old, pair := benchOps(ctx)
	for _, bc := range []struct {
		name   string
		sealed bool
		op     func(l *Log) error
		shm    bool // on /dev/shm, where fdatasync costs nothing: the CPU cost alone
	}{
		{"baseline-unsealed-single-append", false, func(l *Log) error { return l.Append(ctx, old) }, false},
		{"unsealed-intent+result", false, pair, false},
		{"sealed-intent+result", true, pair, false},
		{"cpu-only/baseline-unsealed-single-append", false, func(l *Log) error { return l.Append(ctx, old) }, true},
		{"cpu-only/unsealed-intent+result", false, pair, true},
		{"cpu-only/sealed-intent+result", true, pair, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			if bc.shm {
				if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
					b.Skip("no /dev/shm")
				}
				var err error
				if dir, err = os.MkdirTemp("/dev/shm", "hs-audit-bench-"); err != nil {
					b.Skip(err)
				}
				defer os.RemoveAll(dir)
			}
			path := filepath.Join(dir, "audit.log")
			if bc.sealed {
				if _, err := Init(path, InitOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			l, err := Open(path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			var ds []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if err := bc.op(l); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
			}
			slices.Sort(ds)
			ms := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
			b.ReportMetric(ms(0.5), "p50-ms")
			b.ReportMetric(ms(0.95), "p95-ms")
		})
	}
}

// BenchmarkPairInterleaved runs the three cases of BenchmarkPair in turn within each
// iteration, on the same disk, so a busy shared machine weighs on all of them alike. One
// iteration is all three; the metrics are each case's own p50 and p95.
func BenchmarkPairInterleaved(b *testing.B) {
	ctx := context.Background()
	old, pair := benchOps(ctx)
	open := func(sealed bool) *Log {
		path := filepath.Join(b.TempDir(), "audit.log")
		if sealed {
			if _, err := Init(path, InitOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		l, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		return l
	}
	base, unsealed, sealed := open(false), open(false), open(true)
	cases := []struct {
		name string
		op   func() error
		ds   []time.Duration
	}{
		{name: "baseline-single-append", op: func() error { return base.Append(ctx, old) }},
		{name: "unsealed-pair", op: func() error { return pair(unsealed) }},
		{name: "sealed-pair", op: func() error { return pair(sealed) }},
	}
	for b.Loop() {
		for i := range cases {
			t0 := time.Now()
			if err := cases[i].op(); err != nil {
				b.Fatal(err)
			}
			cases[i].ds = append(cases[i].ds, time.Since(t0))
		}
	}
	for _, c := range cases {
		slices.Sort(c.ds)
		q := func(f float64) float64 { return float64(c.ds[int(f*float64(len(c.ds)-1))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.5), c.name+"-p50-ms")
		b.ReportMetric(q(0.95), c.name+"-p95-ms")
	}
}
