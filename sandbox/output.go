package sandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultSpillLimit bounds one command's spill file (terminal.spill_limit).
const DefaultSpillLimit = 64 << 20

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
	// Past spillLimit bytes, the spill file keeps its first half and the output's last
	// quarter to half, held in two rotating segment files, and notes the gap between.
	spillLimit   int64
	spilled      int64 // bytes in the main spill file
	segs         [2]*os.File
	segBytes     int64
	spillDropped int64
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
	return &Capture{limit: limit, spillDir: dir, spillLimit: DefaultSpillLimit}
}

// SetSpillLimit bounds the spill file to about n bytes (0 = DefaultSpillLimit).
func (c *Capture) SetSpillLimit(n int64) {
	if n <= 0 {
		n = DefaultSpillLimit
	}
	c.mu.Lock()
	c.spillLimit = max(n, 2*int64(c.limit))
	c.mu.Unlock()
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
		c.spillWrite(p)
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
	pruneSpills(c.spillDir, 24*time.Hour, SpillDirLimit(c.spillLimit))
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
	c.spill, c.spillPath, c.spilled = f, f.Name(), int64(len(c.early))
	c.early = nil
}

// spillWrite appends p to the spill file: to the head while it is under half the limit,
// then to the rotating tail segments.
func (c *Capture) spillWrite(p []byte) {
	if room := c.spillLimit/2 - c.spilled; room > 0 {
		n := int(min(room, int64(len(p))))
		if _, err := c.spill.Write(p[:n]); err != nil {
			c.failSpill(err)
			return
		}
		c.spilled += int64(n)
		p = p[n:]
	}
	segCap := max(c.spillLimit/4, 1)
	for len(p) > 0 {
		if c.segs[1] == nil || c.segBytes >= segCap {
			if c.segs[0] != nil {
				fi, _ := c.segs[0].Stat()
				if fi != nil {
					c.spillDropped += fi.Size()
				}
				c.segs[0].Close()
				os.Remove(c.segs[0].Name())
			}
			f, err := os.CreateTemp(c.spillDir, "segment-*.tmp")
			if err != nil {
				c.failSpill(err)
				return
			}
			c.segs[0], c.segs[1], c.segBytes = c.segs[1], f, 0
		}
		n := int(min(segCap-c.segBytes, int64(len(p))))
		if _, err := c.segs[1].Write(p[:n]); err != nil {
			c.failSpill(err)
			return
		}
		c.segBytes += int64(n)
		p = p[n:]
	}
}

func (c *Capture) failSpill(err error) {
	c.spillErr = err
	c.spill.Close()
	c.spill = nil
	c.dropSegments()
}

func (c *Capture) dropSegments() {
	for i, f := range c.segs {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
			c.segs[i] = nil
		}
	}
}

// finishSpill appends the tail segments to the spill file, with a note of the gap.
func (c *Capture) finishSpill() error {
	defer c.dropSegments()
	if c.segs[1] == nil {
		return nil
	}
	if c.spillDropped > 0 {
		note := fmt.Sprintf("\n\n... [spill file limit (terminal.spill_limit %d bytes) reached: %d bytes omitted here] ...\n\n", c.spillLimit, c.spillDropped)
		if _, err := c.spill.WriteString(note); err != nil {
			return err
		}
	}
	for _, f := range c.segs {
		if f == nil {
			continue
		}
		if _, err := f.Seek(0, 0); err != nil {
			return err
		}
		if _, err := io.Copy(c.spill, f); err != nil {
			return err
		}
	}
	return nil
}

// pruneSpills removes spill files older than age and then, oldest first, as many as it takes
// to bring the directory under maxTotal bytes, so the directory cannot grow forever.
func pruneSpills(dir string, age time.Duration, maxTotal int64) {
	entries, _ := os.ReadDir(dir)
	cutoff := time.Now().Add(-age)
	var kept []os.FileInfo
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || info.IsDir() {
			continue
		}
		if info.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		kept = append(kept, info)
		total += info.Size()
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].ModTime().Before(kept[j].ModTime()) })
	for _, info := range kept {
		if total <= maxTotal {
			break
		}
		os.Remove(filepath.Join(dir, info.Name()))
		total -= info.Size()
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

// SpillDirLimit is the total size a spill directory is pruned to: sixteen spill files at
// their limit.
func SpillDirLimit(spillLimit int64) int64 { return 16 * spillLimit }
