package mcpserver

import (
	"fmt"
	"strings"
	"testing"
)

func TestPickLines(t *testing.T) {
	data := []byte("a\nbb\nccc\ndddd")
	for _, tc := range []struct {
		offset, limit, maxBytes int
		content                 string
		start, end              int
		truncated               bool
		next                    int
	}{
		{0, 0, 100, "a\nbb\nccc\ndddd", 1, 4, false, 0},
		{1, 2, 100, "a\nbb\n", 1, 2, true, 3},
		{3, 5, 100, "ccc\ndddd", 3, 4, false, 0},
		{4, 1, 100, "dddd", 4, 4, false, 0},
		{5, 1, 100, "", 5, 4, false, 0},
		{1, 0, 6, "a\nbb\n", 1, 2, true, 3}, // the byte bound stops at a whole line
		{3, 0, 2, "cc", 3, 3, true, 4},      // one line longer than the bound: its head
	} {
		got := pickLines("f", data, tc.offset, tc.limit, tc.maxBytes)
		if got.Content != tc.content || got.StartLine != tc.start || got.EndLine != tc.end ||
			got.Truncated != tc.truncated || got.NextOffset != tc.next || got.TotalLines != 4 || got.TotalBytes != int64(len(data)) {
			t.Errorf("pickLines(offset %d, limit %d, max %d) = %+v; want %q lines %d-%d truncated %v next %d",
				tc.offset, tc.limit, tc.maxBytes, got, tc.content, tc.start, tc.end, tc.truncated, tc.next)
		}
	}
	if got := pickLines("f", nil, 0, 0, 10); got.TotalLines != 0 || got.Content != "" || got.EndLine != 0 {
		t.Errorf("pickLines(empty) = %+v", got)
	}
	if got := pickLines("f", []byte("é\n"), 0, 0, 1); got.Content != "" || !got.Truncated {
		t.Errorf("pickLines cut inside a rune = %+v; want no broken rune", got)
	}
}

func TestOutputMeter(t *testing.T) {
	var m outputMeter
	m.Write([]byte("first line\nsecond"))
	m.Write([]byte(" half\n\n"))
	if n, line := m.snapshot(); n != 24 || line != "second half" {
		t.Errorf("snapshot = %d %q; want 24, second half", n, line)
	}
	m.Write([]byte("progress 10%\rprogress 90%"))
	if _, line := m.snapshot(); line != "progress 90%" {
		t.Errorf("snapshot after \\r = %q; want the text after it", line)
	}
	m.Write([]byte("\n\x1b[31mred\x1b[0m " + strings.Repeat("x", 500) + "\n"))
	_, line := m.snapshot()
	if strings.ContainsRune(line, '\x1b') || len(line) > maxLineShown+len("…") || !strings.HasPrefix(line, "[31mred") {
		t.Errorf("long line = %q; want control characters dropped and the length bounded", line)
	}
}

// A backend's wait lines (sandbox.WithProgress) show until the command writes output.
func TestOutputMeterWaitLine(t *testing.T) {
	m := outputMeter{redact: func(s string) string { return strings.ReplaceAll(s, "sekrit", "***") }}
	fmt.Fprintln(m.waitWriter(), "kubernetes: waiting 5s for pod p: not scheduled (Unschedulable) sekrit")
	if got := m.waitLine(); got != "kubernetes: waiting 5s for pod p: not scheduled (Unschedulable) ***" {
		t.Errorf("waitLine = %q", got)
	}
	if n, line := m.snapshot(); n != 0 || line != "" {
		t.Errorf("a wait line counted as output: %d %q", n, line)
	}
}
