package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"
)

// Capture keeps a bounded copy of one command's stdout and stderr: the head (40 %) and the
// tail (60 %) of each stream, with a marker between. Once anything is dropped, the complete
// output of both streams, in the order it arrived, goes to a private spill file whose path is
// in the Result. Memory stays bounded however much the command writes.
type Capture struct {
	mu       sync.Mutex
	limit    int
	spillDir string
	out, err stream
	// early holds both streams in arrival order until the first drop; then it goes to the
	// spill file and later output is appended there.
	early     []byte
	spill     *os.File
	spillPath string
	spillErr  error
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
	return &Capture{limit: limit, spillDir: dir}
}

// Stdout returns a writer that records p as standard output.
func (c *Capture) Stdout() *CaptureWriter { return &CaptureWriter{c: c, s: &c.out} }

// Stderr returns a writer that records p as standard error.
func (c *Capture) Stderr() *CaptureWriter { return &CaptureWriter{c: c, s: &c.err} }

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
		if _, err := c.spill.Write(p); err != nil {
			c.spillErr = err
			c.spill.Close()
			c.spill = nil
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
	pruneSpills(c.spillDir, 24*time.Hour)
	f, err := os.CreateTemp(c.spillDir, "output-*.log")
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		_, err = f.Write(c.early)
	}
	if err != nil {
		c.spillErr = err
		if f != nil {
			f.Close()
		}
		return
	}
	c.spill, c.spillPath, c.early = f, f.Name(), nil
}

// pruneSpills removes spill files older than age, so the directory cannot grow forever.
func pruneSpills(dir string, age time.Duration) {
	entries, _ := os.ReadDir(dir)
	cutoff := time.Now().Add(-age)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// Finish closes the spill file and fills r's output fields.
func (c *Capture) Finish(r *Result) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spill != nil {
		if err := c.spill.Close(); err != nil && c.spillErr == nil {
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
	if c.spillPath != "" {
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
