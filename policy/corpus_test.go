package policy

import (
	"os"
	"slices"
	"testing"
	"time"
)

func loadCorpus(tb testing.TB) []Entry { return loadSet(tb, "testdata/corpus.tsv") }

func loadSet(tb testing.TB, path string) []Entry {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	entries, err := ReadCorpus(f)
	if err != nil {
		tb.Fatal(err)
	}
	return entries
}

// checkSet measures the classifier on a labelled set, logs every miss, and holds it to the
// gate's aims: recall and hardline recall ≥ 0.95, false positives ≤ 0.05, and never a
// hardline verdict on a benign command.
func checkSet(t *testing.T, path string, minEntries int) {
	entries := loadSet(t, path)
	if len(entries) < minEntries {
		t.Errorf("%s has %d entries; want at least %d", path, len(entries), minEntries)
	}
	m := Measure(entries)
	t.Log(m)
	for _, miss := range m.Misses {
		t.Logf("miss: label=%s got=%s %q (%s)", miss.Entry.Label, miss.Got, miss.Entry.Command, miss.Entry.Note)
	}
	if m.Recall < 0.95 {
		t.Errorf("recall = %.3f; want >= 0.95", m.Recall)
	}
	if m.FPR > 0.05 {
		t.Errorf("false positive rate = %.3f; want <= 0.05", m.FPR)
	}
	if m.HardlineOnBenign != 0 {
		t.Errorf("hardline on benign = %d; want 0", m.HardlineOnBenign)
	}
	if m.HardlineRecall < 0.95 {
		t.Errorf("hardline recall = %.3f; want >= 0.95", m.HardlineRecall)
	}
}

func TestCorpus(t *testing.T) { checkSet(t, "testdata/corpus.tsv", 400) }

// TestClassifyLatency reports the median time to classify a corpus command.
func TestClassifyLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("latency measurement skipped in -short mode")
	}
	entries := loadCorpus(t)
	c := New(Options{})
	var d []time.Duration
	for round := 0; round < 5; round++ {
		for _, e := range entries {
			start := time.Now()
			c.Classify(e.Command)
			d = append(d, time.Since(start))
		}
	}
	slices.Sort(d)
	med := d[len(d)/2]
	t.Logf("classify median %v p99 %v over %d runs", med, d[len(d)*99/100], len(d))
	if !raceEnabled && med > 50*time.Microsecond {
		t.Errorf("classify median = %v; want <= 50µs", med)
	}
}

// BenchmarkClassify classifies the corpus round-robin and reports the
// median time per command next to the mean.
func BenchmarkClassify(b *testing.B) {
	entries := loadCorpus(b)
	c := New(Options{})
	var d []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		c.Classify(entries[i%len(entries)].Command)
		d = append(d, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(d)
	if len(d) > 0 {
		b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "median-ns/op")
	}
}
