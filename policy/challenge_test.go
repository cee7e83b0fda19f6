package policy

import (
	"os"
	"testing"
)

// TestChallenge measures the classifier on an independently written
// challenge set (testdata/challenge.tsv) with the same thresholds as
// TestCorpus, and logs every miss.
func TestChallenge(t *testing.T) {
	f, err := os.Open("testdata/challenge.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := ReadCorpus(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 200 {
		t.Errorf("challenge set has %d entries; want at least 200", len(entries))
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
