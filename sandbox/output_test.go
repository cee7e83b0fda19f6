package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
