package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCaptureSmallOutputIsKeptWhole(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	c := NewCapture(100, dir)
	fmt.Fprint(c.Stdout(), "out1\n")
	fmt.Fprint(c.Stderr(), "err1\n")
	fmt.Fprint(c.Stdout(), "out2\n")
	var r Result
	if err := c.Finish(&r); err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "out1\nout2\n" || r.Stderr != "err1\n" || r.Truncated || r.OutputFile != "" {
		t.Errorf("Finish = %+v; want both streams whole, no spill", r)
	}
	if r.StdoutBytes != 10 || r.StderrBytes != 5 {
		t.Errorf("byte counts = %d/%d; want 10/5", r.StdoutBytes, r.StderrBytes)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a spill directory was made for output that fit: %v", err)
	}
}

// TestCaptureKeepsHeadAndTailAndSpillsEverything writes far more than the limit in small
// chunks and checks the head (40 %), the tail (60 %), the marker, the counts, and the spill
// file: both streams complete, in arrival order, private to the user.
func TestCaptureKeepsHeadAndTailAndSpillsEverything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	const limit = 1000
	c := NewCapture(limit, dir)
	var all bytes.Buffer
	var out bytes.Buffer
	for i := 0; i < 2000; i++ {
		line := fmt.Sprintf("line %05d\n", i)
		c.Stdout().Write([]byte(line))
		out.WriteString(line)
		all.WriteString(line)
		if i%500 == 0 {
			e := fmt.Sprintf("err %d\n", i)
			c.Stderr().Write([]byte(e))
			all.WriteString(e)
		}
	}
	var r Result
	if err := c.Finish(&r); err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || r.OutputFile == "" {
		t.Fatalf("Finish = truncated %v file %q; want both", r.Truncated, r.OutputFile)
	}
	head, tail, ok := strings.Cut(r.Stdout, "\n\n... [output truncated: ")
	if !ok {
		t.Fatalf("no truncation marker in %q", r.Stdout)
	}
	if len(head) != limit*2/5 || !strings.HasPrefix(out.String(), head) {
		t.Errorf("head = %d bytes %q…; want the first %d bytes", len(head), head[:20], limit*2/5)
	}
	_, tail, _ = strings.Cut(tail, "] ...\n\n")
	if len(tail) != limit-limit*2/5 || !strings.HasSuffix(out.String(), tail) {
		t.Errorf("tail = %d bytes …%q; want the last %d bytes", len(tail), tail[len(tail)-20:], limit-limit*2/5)
	}
	omitted := fmt.Sprintf("%d bytes omitted; full output in %s", out.Len()-len(head)-len(tail), r.OutputFile)
	if !strings.Contains(r.Stdout, omitted) {
		t.Errorf("marker does not say %q: %q", omitted, r.Stdout[len(head):len(head)+120])
	}
	if r.Stderr != "err 0\nerr 500\nerr 1000\nerr 1500\n" || r.StdoutBytes != int64(out.Len()) {
		t.Errorf("stderr %q, stdout bytes %d; want the whole small stream and %d", r.Stderr, r.StdoutBytes, out.Len())
	}
	spilled, err := os.ReadFile(r.OutputFile)
	if err != nil || !bytes.Equal(spilled, all.Bytes()) {
		t.Errorf("spill file has %d bytes (%v); want both streams in arrival order, %d bytes", len(spilled), err, all.Len())
	}
	if fi, err := os.Stat(r.OutputFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("spill file mode = %v (%v); want 0600", fi.Mode(), err)
	}
}

// TestCaptureOneHugeWrite: a single write far larger than the limit keeps the right head and
// tail too (the ring buffer's fast path).
func TestCaptureOneHugeWrite(t *testing.T) {
	c := NewCapture(100, t.TempDir())
	data := make([]byte, 10_000)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	c.Stdout().Write(data)
	var r Result
	c.Finish(&r)
	if !strings.HasPrefix(r.Stdout, string(data[:40])) || !strings.HasSuffix(r.Stdout, string(data[len(data)-60:])) {
		t.Errorf("huge write kept %q", r.Stdout)
	}
}

// TestCaptureNeverSplitsACharacter: the cut points fall inside multi-byte characters, and
// the kept text is still valid UTF-8.
func TestCaptureNeverSplitsACharacter(t *testing.T) {
	c := NewCapture(101, t.TempDir())
	c.Stdout().Write([]byte(strings.Repeat("é€😀", 200)))
	var r Result
	c.Finish(&r)
	if !r.Truncated || !utf8.ValidString(r.Stdout) {
		t.Errorf("kept output is not valid UTF-8: %q", r.Stdout)
	}
}

// TestCaptureSpillFailureIsReported: when the spill file cannot be made, the bounded result
// is still returned and Finish says why the rest is lost.
func TestCaptureSpillFailureIsReported(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o600)
	c := NewCapture(10, filepath.Join(blocker, "spill")) // a directory under a regular file
	c.Stdout().Write([]byte(strings.Repeat("x", 100)))
	var r Result
	err := c.Finish(&r)
	if err == nil || !r.Truncated || r.OutputFile != "" || !strings.Contains(r.Stdout, "could not be saved") {
		t.Errorf("Finish = %v, %+v; want an error, a truncated result and no file", err, r)
	}
}

// TestCaptureSpillCapKeepsHeadAndTail: a spill file beyond the spill limit keeps the first
// and the last half of the output, byte for byte, with a note of the gap between, in the
// session's own directory, and no ring file is left.
func TestCaptureSpillCapKeepsHeadAndTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "output")
	const spillLimit = 4096
	c := NewCapture(100, dir).ForSession("capped", spillLimit)
	var all bytes.Buffer
	for i := 0; all.Len() < 100_000; i++ {
		chunk := []byte(fmt.Sprintf("line %06d\n", i))
		if i == 5000 {
			chunk = bytes.Repeat([]byte("huge"), 3*spillLimit) // one write larger than the ring
		}
		if i%7 == 0 {
			c.Stderr().Write(chunk)
		} else {
			c.Stdout().Write(chunk)
		}
		all.Write(chunk)
	}
	// Output after the huge write, so the ring wraps after a whole overwrite too.
	for i := 0; i < 300; i++ {
		chunk := []byte(fmt.Sprintf("tail %04d\n", i))
		c.Stdout().Write(chunk)
		all.Write(chunk)
	}
	var r Result
	if err := c.Finish(&r); err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(r.OutputFile) != filepath.Join(dir, "capped") {
		t.Errorf("OutputFile = %q; want it in the session's directory %s", r.OutputFile, filepath.Join(dir, "capped"))
	}
	got, err := os.ReadFile(r.OutputFile)
	if err != nil {
		t.Fatal(err)
	}
	head, tail := all.Bytes()[:spillLimit/2], all.Bytes()[all.Len()-spillLimit/2:]
	gap := int64(all.Len() - spillLimit)
	note := fmt.Sprintf("%d bytes dropped here", gap)
	if !bytes.HasPrefix(got, head) || !bytes.HasSuffix(got, tail) || !bytes.Contains(got, []byte(note)) {
		t.Errorf("spill file (%d bytes) = %.80q…%.80q; want the first and last %d bytes of the output and %q", len(got), got, got[max(0, len(got)-80):], spillLimit/2, note)
	}
	if len(got) > spillLimit+300 {
		t.Errorf("spill file is %d bytes; want at most the %d-byte spill limit and a note", len(got), spillLimit)
	}
	if !strings.Contains(r.Stdout, "terminal.spill_limit") {
		t.Errorf("the truncation marker does not say the spill file is capped: %q", r.Stdout)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "capped"))
	if len(entries) != 1 {
		t.Errorf("the session's spill directory holds %d files; want only the spill file", len(entries))
	}
	// Under the cap the spill file is the whole output.
	c = NewCapture(100, dir).ForSession("capped", spillLimit)
	small := strings.Repeat("x", spillLimit-10)
	c.Stdout().Write([]byte(small))
	if err := c.Finish(&r); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(r.OutputFile); string(got) != small {
		t.Errorf("spill file under the cap = %d bytes; want the whole %d-byte output", len(got), len(small))
	}
}

// TestRemoveSpills removes one session's spill files and no other's.
func TestRemoveSpills(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "output")
	files := map[string]string{}
	for _, name := range []string{"a", "a-b"} {
		c := NewCapture(10, dir).ForSession(name, 0)
		c.Stdout().Write(bytes.Repeat([]byte("y"), 100))
		var r Result
		if err := c.Finish(&r); err != nil || r.OutputFile == "" {
			t.Fatalf("Finish = %v, file %q", err, r.OutputFile)
		}
		files[name] = r.OutputFile
	}
	if err := RemoveSpills(dir, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(files["a"]); !os.IsNotExist(err) {
		t.Errorf("RemoveSpills(a) left %s: %v", files["a"], err)
	}
	if _, err := os.Stat(files["a-b"]); err != nil {
		t.Errorf("RemoveSpills(a) removed another session's %s: %v", files["a-b"], err)
	}
	if err := RemoveSpills(dir, "../x"); err == nil {
		t.Errorf("RemoveSpills(../x) = nil; want an invalid name refused")
	}
}

// TestSpillsPrunedByAgeAndTotal: making a spill file removes those older than a day, then the
// oldest until all of them fit in 16 spill limits; files of running commands stay.
func TestSpillsPrunedByAgeAndTotal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "output")
	const spillLimit = 1000
	now := time.Now()
	write := func(name string, size int, age time.Duration) string {
		p := filepath.Join(dir, "s", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte("z"), size), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ancient := write("output-ancient.log", 10, 25*time.Hour)
	var old []string
	for i := range 20 { // 20 000 bytes, over the 16 000-byte budget
		old = append(old, write(fmt.Sprintf("output-%02d.log", i), spillLimit, time.Duration(60-i)*time.Minute))
	}
	running := write("output-running.log", 5*spillLimit, 0)
	c := NewCapture(10, dir).ForSession("t", spillLimit)
	c.Stdout().Write(bytes.Repeat([]byte("n"), 100))
	var r Result
	if err := c.Finish(&r); err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if exists(ancient) {
		t.Errorf("a spill file older than a day was kept")
	}
	if !exists(running) || !exists(r.OutputFile) {
		t.Errorf("a file of a running command was removed (running %v, new %v)", exists(running), exists(r.OutputFile))
	}
	// 5 000 running + 100 new + the newest old files within 16 000 bytes: the oldest 9 go.
	for i, p := range old {
		if want := i >= 9; exists(p) != want {
			t.Errorf("old spill file #%d (age %d min) kept = %v; want %v", i, 60-i, exists(p), want)
		}
	}
}

func TestTailWriter(t *testing.T) {
	tw := &TailWriter{Max: 9}
	fmt.Fprint(tw, "  first line\n")
	fmt.Fprint(tw, "the end \n")
	if got := tw.String(); got != "the end" {
		t.Errorf("String() = %q; want the last 9 bytes, trimmed", got)
	}
	var def TailWriter
	def.Write(make([]byte, 5000))
	if n := len(def.buf); n != 2048 {
		t.Errorf("default keeps %d bytes, want 2048", n)
	}
}
