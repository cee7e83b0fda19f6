package policy

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// pin rewrites the known-miss lists from the current classifier:
// go test ./policy -run TestSets -pin. Review the diff before committing it.
var pin = flag.Bool("pin", false, "rewrite testdata/*.misses from the current classifier")

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

// knownMiss is one pinned miss: a command the classifier is known to get
// wrong, with the verdict it gives today.
type knownMiss struct {
	Label   Verdict `json:"label"`
	Got     Verdict `json:"got"`
	Command string  `json:"command"`
}

func missKey(label, got Verdict, command string) string {
	return string(label) + "\x00" + string(got) + "\x00" + command
}

func loadMisses(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var m knownMiss
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		out[missKey(m.Label, m.Got, m.Command)] = true
	}
	return out
}

// checkSet measures the classifier on a labelled set and holds it to the
// exact list of known misses in the set's .misses file: a new miss (a
// regression) fails, and so does a pinned miss that is now classified
// correctly (the list must be re-pinned so it stays exact). Every set must
// also keep hardline verdicts off benign commands.
func checkSet(t *testing.T, path string, minEntries int) {
	entries := loadSet(t, path)
	if len(entries) < minEntries {
		t.Errorf("%s has %d entries; want at least %d", path, len(entries), minEntries)
	}
	m := Measure(entries)
	t.Log(m)
	missPath := strings.TrimSuffix(path, ".tsv") + ".misses"
	if *pin {
		var sb strings.Builder
		fmt.Fprintf(&sb, "# Known misses of %s, pinned by `go test ./policy -run TestSets -pin`.\n", path)
		sb.WriteString("# One JSON object per line: label, the verdict the classifier gives, command.\n")
		for _, miss := range m.Misses {
			b, _ := json.Marshal(knownMiss{miss.Entry.Label, miss.Got, miss.Entry.Command})
			sb.Write(b)
			sb.WriteByte('\n')
		}
		if err := os.WriteFile(missPath, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range compareMisses(m, loadMisses(t, missPath)) {
		t.Error(e)
	}
	if m.HardlineOnBenign != 0 {
		t.Errorf("hardline on benign = %d; want 0", m.HardlineOnBenign)
	}
}

// TestSets measures every labelled set in testdata against its pinned misses.
func TestSets(t *testing.T) {
	for _, s := range []struct {
		path string
		min  int
	}{
		{"testdata/corpus.tsv", 400},
		{"testdata/challenge.tsv", 200},
		{"testdata/independent.tsv", 600},
		{"testdata/agents.tsv", 300},
	} {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(s.path, "testdata/"), ".tsv"), func(t *testing.T) {
			checkSet(t, s.path, s.min)
		})
	}
}

// compareMisses lists the differences between a measurement's misses and
// the pinned ones: new misses, and pinned misses that no longer happen.
func compareMisses(m Metrics, known map[string]bool) []string {
	var errs []string
	seen := map[string]bool{}
	for _, miss := range m.Misses {
		k := missKey(miss.Entry.Label, miss.Got, miss.Entry.Command)
		seen[k] = true
		if !known[k] {
			errs = append(errs, fmt.Sprintf("new miss: label=%s got=%s %q (%s)", miss.Entry.Label, miss.Got, miss.Entry.Command, miss.Entry.Note))
		}
	}
	var stale []string
	for k := range known {
		if !seen[k] {
			parts := strings.SplitN(k, "\x00", 3)
			stale = append(stale, fmt.Sprintf("pinned miss no longer happens (re-pin with -pin): label=%s got=%s %q", parts[0], parts[1], parts[2]))
		}
	}
	slices.Sort(stale)
	return append(errs, stale...)
}

// TestCompareMisses proves the pinned-miss check fails on a regression and
// on a stale pin, and passes on the exact list.
func TestCompareMisses(t *testing.T) {
	m := Measure([]Entry{
		{Label: VerdictSafe, Command: "ls"},
		{Label: VerdictDangerous, Command: "echo harmless", Note: "mislabelled on purpose"},
	})
	miss := missKey(VerdictDangerous, VerdictSafe, "echo harmless")
	if errs := compareMisses(m, map[string]bool{}); len(errs) != 1 || !strings.HasPrefix(errs[0], "new miss") {
		t.Errorf("unpinned miss: errors = %q; want one new miss", errs)
	}
	if errs := compareMisses(m, map[string]bool{miss: true}); len(errs) != 0 {
		t.Errorf("exact pin: errors = %q; want none", errs)
	}
	stale := missKey(VerdictDangerous, VerdictSafe, "rm -rf ./gone")
	if errs := compareMisses(m, map[string]bool{miss: true, stale: true}); len(errs) != 1 || !strings.Contains(errs[0], "no longer happens") {
		t.Errorf("stale pin: errors = %q; want one stale pin", errs)
	}
	dir := t.TempDir()
	line, _ := json.Marshal(knownMiss{VerdictDangerous, VerdictSafe, "echo harmless"})
	if err := os.WriteFile(dir+"/s.misses", append([]byte("# comment\n"), append(line, '\n')...), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := loadMisses(t, dir+"/s.misses"); !got[miss] || len(got) != 1 {
		t.Errorf("loadMisses = %v; want the one pinned miss", got)
	}
}

// BenchmarkClassify classifies the corpus round-robin and reports the
// median time per command next to the mean.
func BenchmarkClassify(b *testing.B) {
	for _, set := range []string{"corpus", "independent"} {
		b.Run(set, func(b *testing.B) {
			entries := loadSet(b, "testdata/"+set+".tsv")
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
		})
	}
}
