package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSpillLimitKeepsHeadAndTail(t *testing.T) {
	dir := t.TempDir()
	c := NewCapture(1000, dir)
	c.SetSpillLimit(40_000)
	var all bytes.Buffer
	for i := range 20_000 { // about 200 KB of numbered lines
		line := fmt.Sprintf("%08d\n", i)
		all.WriteString(line)
		c.Stdout().Write([]byte(line))
	}
	var r Result
	if err := c.Finish(&r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(r.OutputFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 40_000+200 || len(b) < 30_000 {
		t.Errorf("spill file has %d bytes; want about the 40000-byte limit", len(b))
	}
	head, tail, ok := strings.Cut(string(b), "... [spill file limit")
	if !ok {
		t.Fatalf("spill file lacks the note of its gap")
	}
	if !strings.HasPrefix(all.String(), strings.TrimSuffix(head, "\n\n")) || len(head) < 19_000 {
		t.Errorf("spill file head (%d bytes) is not the output's first half", len(head))
	}
	_, tail, _ = strings.Cut(tail, "] ...\n\n")
	if !strings.HasSuffix(all.String(), tail) || len(tail) < 10_000 {
		t.Errorf("spill file tail (%d bytes) is not the output's end", len(tail))
	}
	if r.StdoutBytes != int64(all.Len()) {
		t.Errorf("StdoutBytes = %d; want %d", r.StdoutBytes, all.Len())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "segment-*")); len(left) != 0 {
		t.Errorf("segment files left behind: %v", left)
	}
}

func TestPruneSpillsBySize(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for i := range 5 {
		p := filepath.Join(dir, fmt.Sprintf("output-%d.log", i))
		if err := os.WriteFile(p, make([]byte, 1000), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, now.Add(time.Duration(i-10)*time.Minute), now.Add(time.Duration(i-10)*time.Minute))
	}
	old := filepath.Join(dir, "output-old.log")
	os.WriteFile(old, []byte("x"), 0o600)
	os.Chtimes(old, now.Add(-48*time.Hour), now.Add(-48*time.Hour))
	pruneSpills(dir, 24*time.Hour, 2500)
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	want := []string{filepath.Join(dir, "output-3.log"), filepath.Join(dir, "output-4.log")}
	if fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("after pruning to 2500 bytes: %v; want the two newest %v", left, want)
	}
}
