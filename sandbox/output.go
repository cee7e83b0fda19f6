package sandbox

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultSpillLimit bounds one command's spill file (terminal.spill_limit).
const DefaultSpillLimit = 64 << 20

// Spill files are pruned when a new one is made: those older than spillMaxAge, then the
// oldest until all of them together take at most spillTotalFactor spill limits.
const (
	spillMaxAge      = 24 * time.Hour
	spillTotalFactor = 16
	// spillBusy protects the files of commands still running from the size rule.
	spillBusy = time.Minute
)

// Capture keeps a bounded copy of one command's stdout and stderr: the head (40 %) and the
// tail (60 %) of each stream, with a marker between. Once anything is dropped, the complete
// output of both streams, in the order it arrived, goes to a private spill file whose path is
// in the Result. Memory stays bounded however much the command writes.
//
// A spill file is itself bounded by the spill limit (DefaultSpillLimit unless ForSession sets
// another): it keeps the first half and the last half of the output, with a note where the
// middle was dropped. The last half is kept in a ring file beside it while the command runs.
type Capture struct {
	mu       sync.Mutex
	limit    int    // guarded by mu
	spillDir string // guarded by mu
	out, err stream // guarded by mu
	// early holds both streams in arrival order until the first drop; then it goes to the
	// spill file and later output is appended there.
	early     []byte   // guarded by mu
	spill     *os.File // guarded by mu
	spillPath string   // guarded by mu
	spillErr  error    // guarded by mu

	spillRoot  string   // guarded by mu; the backend's spill directory; spillDir may be a session's under it
	spillLimit int64    // guarded by mu
	spillHead  int64    // guarded by mu; bytes written to the spill file itself
	ring       *os.File // guarded by mu; the spill's last half, a ring buffer
	ringPos    int64    // guarded by mu; where the next byte goes; the oldest byte once the ring is full
	ringLen    int64    // guarded by mu
	ringTotal  int64    // guarded by mu; bytes that went to the ring
	spillGap   int64    // guarded by mu; bytes dropped from the spill file's middle
}

type stream struct {
	head  []byte
	tail  []byte // ring buffer
	start int    // ring start
	total int64
}

// NewCapture returns a capture keeping limit bytes per stream (0 = DefaultOutputLimit) and
// spilling into dir (created 0700 if needed).
func NewCapture(limit int, dir string) *Capture {
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	return &Capture{limit: limit, spillDir: dir, spillRoot: dir, spillLimit: DefaultSpillLimit}
}

// ForSession puts the spill file in the session's own directory under the spill directory,
// so that RemoveSpills removes it with the session, and bounds it to spillLimit bytes
// (0 = DefaultSpillLimit). Call it before any output arrives.
func (c *Capture) ForSession(name string, spillLimit int64) *Capture {
	if ValidateSessionName(name) == nil {
		c.spillDir = filepath.Join(c.spillDir, name)
	}
	if spillLimit > 0 {
		c.spillLimit = spillLimit
	}
	return c
}

// RemoveSpills removes the spill files of the session name kept under dir (a backend's spill
// directory, as given to NewCapture).
func RemoveSpills(dir, name string) error {
	if err := ValidateSessionName(name); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(dir, name))
}

// Stdout returns a writer that records p as standard output.
func (c *Capture) Stdout() *CaptureWriter { return &CaptureWriter{c: c, s: &c.out} }

// Stderr returns a writer that records p as standard error.
func (c *Capture) Stderr() *CaptureWriter { return &CaptureWriter{c: c, s: &c.err} }

// Tee returns the capture's stdout and stderr writers, each also copying to the caller's
// writer for that stream when it is not nil (a command's live Stdout and Stderr).
func (c *Capture) Tee(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	out, err := io.Writer(c.Stdout()), io.Writer(c.Stderr())
	if stdout != nil {
		out = io.MultiWriter(out, stdout)
	}
	if stderr != nil {
		err = io.MultiWriter(err, stderr)
	}
	return out, err
}

// CaptureWriter is one stream of a Capture.
type CaptureWriter struct {
	c *Capture
	s *stream
}

func (w *CaptureWriter) Write(p []byte) (int, error) {
	w.c.write(w.s, p)
	return len(p), nil
}

func (c *Capture) write(s *stream, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.total += int64(len(p))
	if c.spill == nil && c.spillErr == nil {
		c.early = append(c.early, p...)
		if len(c.early) > 2*c.limit || s.total > int64(c.limit) {
			c.openSpill()
		}
	} else if c.spill != nil {
		if err := c.spillWrite(p); err != nil {
			c.spillFailed(err)
		}
	}
	headCap := c.limit * 2 / 5
	if n := min(headCap-len(s.head), len(p)); n > 0 {
		s.head = append(s.head, p[:n]...)
		p = p[n:]
	}
	tailCap := c.limit - headCap
	if len(p) >= tailCap {
		s.tail = append(s.tail[:0], p[len(p)-tailCap:]...)
		s.start = 0
		return
	}
	for len(p) > 0 {
		if len(s.tail) < tailCap {
			n := min(tailCap-len(s.tail), len(p))
			s.tail = append(s.tail, p[:n]...)
			p = p[n:]
			continue
		}
		n := copy(s.tail[s.start:], p)
		s.start = (s.start + n) % tailCap
		p = p[n:]
	}
}

func (c *Capture) openSpill() {
	if err := os.MkdirAll(c.spillDir, 0o700); err != nil {
		c.spillErr = err
		return
	}
	pruneSpills(c.spillRoot, spillMaxAge, spillTotalFactor*c.spillLimit)
	f, err := os.CreateTemp(c.spillDir, "output-*.log")
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err != nil {
		c.spillErr = err
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
		return
	}
	c.spill, c.spillPath = f, f.Name()
	early := c.early
	c.early = nil
	if err := c.spillWrite(early); err != nil {
		c.spillFailed(err)
	}
}

// spillWrite appends p to the spill file up to half the spill limit, and keeps the rest in
// the ring of the last half.
func (c *Capture) spillWrite(p []byte) error {
	headCap := c.spillLimit / 2
	if n := min(headCap-c.spillHead, int64(len(p))); n > 0 {
		if _, err := c.spill.Write(p[:n]); err != nil {
			return err
		}
		c.spillHead += n
		p = p[n:]
	}
	if len(p) == 0 {
		return nil
	}
	ringCap := c.spillLimit - headCap
	if c.ring == nil {
		f, err := os.CreateTemp(c.spillDir, ".ring-*.tmp")
		if err != nil {
			return err
		}
		c.ring = f
	}
	c.ringTotal += int64(len(p))
	if int64(len(p)) >= ringCap {
		if _, err := c.ring.WriteAt(p[int64(len(p))-ringCap:], 0); err != nil {
			return err
		}
		c.ringPos, c.ringLen = 0, ringCap
		return nil
	}
	for len(p) > 0 {
		n := min(ringCap-c.ringPos, int64(len(p)))
		if _, err := c.ring.WriteAt(p[:n], c.ringPos); err != nil {
			return err
		}
		c.ringPos = (c.ringPos + n) % ringCap
		c.ringLen = min(c.ringLen+n, ringCap)
		p = p[n:]
	}
	return nil
}

// spillFailed stops spilling after err; what was written so far stays.
func (c *Capture) spillFailed(err error) {
	c.spillErr = err
	if c.spill != nil {
		c.spill.Close()
		c.spill = nil
	}
	c.dropRing()
}

func (c *Capture) dropRing() {
	if c.ring != nil {
		c.ring.Close()
		os.Remove(c.ring.Name())
		c.ring = nil
	}
}

// finishSpill appends the note on the dropped middle and the ring's bytes, oldest first, to
// the spill file, and closes it.
func (c *Capture) finishSpill() error {
	defer c.dropRing()
	if c.ring != nil {
		ringCap := c.spillLimit - c.spillLimit/2
		c.spillGap = c.ringTotal - c.ringLen
		if c.spillGap > 0 {
			note := fmt.Sprintf("\n\n... [hermes-sandbox: %d bytes dropped here; the file keeps the first %d and the last %d bytes (terminal.spill_limit)] ...\n\n",
				c.spillGap, c.spillHead, c.ringLen)
			if _, err := io.WriteString(c.spill, note); err != nil {
				c.spill.Close()
				return err
			}
		}
		start := int64(0)
		if c.ringLen == ringCap {
			start = c.ringPos
		}
		parts := []*io.SectionReader{io.NewSectionReader(c.ring, start, c.ringLen-start)}
		if start > 0 {
			parts = append(parts, io.NewSectionReader(c.ring, 0, start))
		}
		for _, r := range parts {
			if _, err := io.Copy(c.spill, r); err != nil {
				c.spill.Close()
				return err
			}
		}
	}
	return c.spill.Close()
}

// pruneSpills removes spill files under root (and its sessions' directories) older than age,
// then the oldest until together they take at most total bytes, so the directory cannot grow
// forever. Files written in the last minute belong to running commands and stay.
func pruneSpills(root string, age time.Duration, total int64) {
	type spillFile struct {
		path string
		mod  time.Time
		size int64
	}
	var files []spillFile
	now := time.Now()
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if now.Sub(info.ModTime()) > age {
			os.Remove(p)
			return nil
		}
		files = append(files, spillFile{p, info.ModTime(), info.Size()})
		return nil
	})
	var sum int64
	for _, f := range files {
		sum += f.size
	}
	slices.SortFunc(files, func(a, b spillFile) int { return a.mod.Compare(b.mod) })
	for _, f := range files {
		if sum <= total {
			break
		}
		if now.Sub(f.mod) < spillBusy {
			continue
		}
		if os.Remove(f.path) == nil {
			sum -= f.size
		}
	}
}

// Finish closes the spill file and fills r's output fields.
func (c *Capture) Finish(r *Result) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spill != nil {
		if err := c.finishSpill(); err != nil && c.spillErr == nil {
			c.spillErr = err
		}
		c.spill = nil
	}
	var truncOut, truncErr bool
	r.Stdout, truncOut = c.render(&c.out)
	r.Stderr, truncErr = c.render(&c.err)
	r.StdoutBytes, r.StderrBytes = c.out.total, c.err.total
	r.Truncated = truncOut || truncErr
	if c.spillPath != "" {
		r.OutputFile = c.spillPath
	}
	if c.spillErr != nil {
		return fmt.Errorf("spill output to %s: %w", c.spillDir, c.spillErr)
	}
	return nil
}

func (c *Capture) render(s *stream) (string, bool) {
	tail := append(append([]byte(nil), s.tail[s.start:]...), s.tail[:s.start]...)
	kept := int64(len(s.head) + len(tail))
	if s.total <= kept {
		return string(s.head) + string(tail), false
	}
	head := trimPartialEnd(s.head)
	tail = trimPartialStart(tail)
	omitted := s.total - int64(len(head)) - int64(len(tail))
	where := "the full output could not be saved"
	switch {
	case c.spillPath != "" && c.spillGap > 0:
		where = fmt.Sprintf("the first and last %d bytes of the output in %s (terminal.spill_limit)", c.spillLimit/2, c.spillPath)
	case c.spillPath != "":
		where = "full output in " + c.spillPath
	}
	marker := fmt.Sprintf("\n\n... [output truncated: %d bytes omitted; %s] ...\n\n", omitted, where)
	return string(head) + marker + string(tail), true
}

// trimPartialEnd drops an incomplete UTF-8 sequence at the end of b.
func trimPartialEnd(b []byte) []byte {
	for i := 1; i <= 3 && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// trimPartialStart drops UTF-8 continuation bytes at the start of b.
func trimPartialStart(b []byte) []byte {
	for i := 0; i < 3 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return b
}

// TailWriter keeps the last Max bytes written to it (2 KiB when Max is 0): the end of what a
// helper printed to stderr, for an error message. It is safe for concurrent use.
type TailWriter struct {
	Max int

	mu  sync.Mutex
	buf []byte // guarded by mu
}

func (t *TailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	limit := t.Max
	if limit <= 0 {
		limit = 2 << 10
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > limit {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-limit:]...)
	}
	return len(p), nil
}

// String is what was kept, without surrounding white space.
func (t *TailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
