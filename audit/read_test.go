package audit

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestScanLinesBackward(t *testing.T) {
	long := strings.Repeat("x", 20000)
	tests := []string{
		"",
		"a",
		"a\n",
		"a\nb",
		"a\nb\n",
		"\n",
		"\n\na\n\n",
		long + "\n" + long,
		"a\n" + long + "\nb\n",
	}
	for _, in := range tests {
		// Expected: forward split, last line first.
		var want []string
		var wantTerm []bool
		if in != "" {
			parts := strings.Split(strings.TrimSuffix(in, "\n"), "\n")
			for i := len(parts) - 1; i >= 0; i-- {
				want = append(want, parts[i])
				wantTerm = append(wantTerm, i < len(parts)-1 || strings.HasSuffix(in, "\n"))
			}
		}
		var got []string
		var gotTerm []bool
		err := scanLinesBackward(strings.NewReader(in), int64(len(in)), func(line []byte, terminated bool) bool {
			got = append(got, string(line))
			gotTerm = append(gotTerm, terminated)
			return false
		})
		if err != nil || strings.Join(got, "|") != strings.Join(want, "|") || len(gotTerm) != len(wantTerm) {
			t.Errorf("scanLinesBackward(%.20q) = %.40q, %v; want %.40q", in, got, err, want)
			continue
		}
		for i := range gotTerm {
			if gotTerm[i] != wantTerm[i] {
				t.Errorf("scanLinesBackward(%.20q) line %d terminated = %v; want %v", in, i, gotTerm[i], wantTerm[i])
			}
		}
	}
}

func TestTail(t *testing.T) {
	l, path := openLog(t, Options{})
	appendN(t, l, "s", 10)
	for _, tt := range []struct{ n, first, count int }{{3, 8, 3}, {1, 10, 1}, {0, 1, 10}, {50, 1, 10}} {
		rs, err := Tail(path, tt.n)
		if err != nil || len(rs) != tt.count || rs[0].Seq != int64(tt.first) || rs[len(rs)-1].Seq != 10 {
			t.Errorf("Tail(%d) = %d records from seq %v, %v; want %d from seq %d", tt.n, len(rs), seqs(rs), err, tt.count, tt.first)
		}
	}
	// A torn last line is skipped.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":11,"ti`)
	f.Close()
	if rs, err := Tail(path, 2); err != nil || len(rs) != 2 || rs[1].Seq != 10 {
		t.Errorf("Tail(2) after a torn write = %v, %v; want seqs 9, 10", seqs(rs), err)
	}
}

func seqs(rs []Record) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Seq)
	}
	return out
}

func TestFilterSession(t *testing.T) {
	rs := []Record{{Seq: 1, Session: "a"}, {Seq: 2, Session: "b"}, {Seq: 3, Session: "a"}}
	if got := seqs(FilterSession(rs, "a")); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("FilterSession(a) = %v; want [1 3]", got)
	}
	if got := FilterSession(rs, "c"); len(got) != 0 {
		t.Errorf("FilterSession(c) = %v; want none", got)
	}
}

func TestFormat(t *testing.T) {
	code := 2
	r := Record{Seq: 7, Time: time.Date(2025, 3, 4, 5, 6, 7, 8e6, time.UTC), Session: "dev", Backend: "docker",
		Tool: ToolExec, Command: "echo hi\nrm -rf x", Verdict: "dangerous", Decision: DecisionApprovedOnce,
		Approver: "user", ExitCode: &code, DurationMS: 12.34}
	want := `2025-03-04T05:06:07.008Z dev docker dangerous/approved_once(user) exit=2 12.3ms "echo hi\nrm -rf x"`
	if got := Format(r); got != want {
		t.Errorf("Format() = %q; want %q", got, want)
	}
	r = Record{Time: r.Time, Tool: ToolReadFile, Command: "/etc/passwd", Decision: DecisionRefused, Error: "tools.file_system is off"}
	want = `2025-03-04T05:06:07.008Z - - -/refused exit=- 0s read_file /etc/passwd error="tools.file_system is off"`
	if got := Format(r); got != want {
		t.Errorf("Format() = %q; want %q", got, want)
	}
}

// receive waits for n records from ch, failing after a deadline.
func receive(t *testing.T, ch <-chan Record, n int) []Record {
	t.Helper()
	var out []Record
	deadline := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case r := <-ch:
			out = append(out, r)
		case <-deadline:
			t.Fatalf("received %d records (%v) before the deadline; want %d", len(out), seqs(out), n)
		}
	}
	return out
}

func TestFollow(t *testing.T) {
	l, path := openLog(t, Options{})
	appendN(t, l, "s", 2)
	ch := make(chan Record, 100)
	fl, err := newFollower(path, func(r Record) { ch <- r })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- fl.run(ctx, 5*time.Millisecond) }()

	// Only records appended after the follower started.
	appendN(t, l, "s", 3)
	if got := seqs(receive(t, ch, 3)); got[0] != 3 || got[2] != 5 {
		t.Errorf("followed seqs = %v; want 3..5", got)
	}

	// A line written in two pieces is delivered once, whole.
	r := Record{Seq: 6, Command: "split", PrevHash: GenesisHash}
	line, _, _ := encode(r)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(line[:20])
	f.Write(append(line[20:], '\n'))
	f.Close()
	if got := receive(t, ch, 1); got[0].Command != "split" {
		t.Errorf("followed %+v; want the split record", got[0])
	}

	// After rotation, the new file is followed from its start.
	for _, p := range []string{path, path + ".checkpoint"} {
		if err := os.Rename(p, p+".1"); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, l, "s", 1)
	if got := receive(t, ch, 1); got[0].Seq != 1 {
		t.Errorf("after rotation followed seq %d; want 1", got[0].Seq)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("follow returned %v after cancel; want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not stop after cancel")
	}
	select {
	case r := <-ch:
		t.Errorf("unexpected extra record %+v", r)
	default:
	}
}

func TestFollowWaitsForFile(t *testing.T) {
	path := t.TempDir() + "/later/audit.log"
	ch := make(chan Record, 10)
	fl, err := newFollower(path, func(r Record) { ch <- r })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- fl.run(ctx, 5*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendN(t, l, "s", 2)
	if got := seqs(receive(t, ch, 2)); got[0] != 1 || got[1] != 2 {
		t.Errorf("followed %v; want [1 2]", got)
	}
}

func TestFollowStartsAfterPartialLine(t *testing.T) {
	l, path := openLog(t, Options{})
	appendN(t, l, "s", 1)
	full := lines(t, path)[0]
	// The file currently ends in the middle of a line being written.
	os.WriteFile(path, append(append(full, '\n'), full[:10]...), 0o600)
	fl, err := newFollower(path, func(Record) {})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(full) + 1); fl.off != want {
		t.Errorf("follower offset = %d; want %d (start of the partial line)", fl.off, want)
	}
}
