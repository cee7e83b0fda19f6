package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressInterval is how often a running command reports progress.
const progressInterval = time.Second

// maxLineShown bounds the latest output line in a progress message, in bytes.
const maxLineShown = 200

// outputMeter counts a command's output as it streams and remembers its latest line. It is
// safe for the concurrent writes of stdout and stderr.
type outputMeter struct {
	// redact hides secrets in a line before it is shown (nil = none); it sees the whole
	// line, before the line is cut to maxLineShown.
	redact  func(string) string
	mu      sync.Mutex
	bytes   int64  // guarded by mu
	partial []byte // guarded by mu; the unfinished line, bounded
	last    string // guarded by mu; the latest finished non-blank line
	waiting string // guarded by mu; the latest line of a backend's long wait (sandbox.WithProgress)
}

// waitWriter takes the lines a backend reports while it waits (sandbox.WithProgress); the
// latest one goes into the progress message until the command writes output.
func (m *outputMeter) waitWriter() io.Writer { return waitLines{m} }

type waitLines struct{ m *outputMeter }

func (w waitLines) Write(p []byte) (int, error) {
	for _, l := range bytes.Split(p, []byte("\n")) {
		line := w.m.clean(l)
		if line == "" {
			continue
		}
		w.m.mu.Lock()
		w.m.waiting = line
		w.m.mu.Unlock()
	}
	return len(p), nil
}

func (m *outputMeter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(p)
	m.bytes += int64(n)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.partial = appendBounded(m.partial, p)
			break
		}
		m.partial = appendBounded(m.partial, p[:i])
		if line := m.clean(m.partial); line != "" {
			m.last = line
		}
		m.partial = m.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func appendBounded(dst, p []byte) []byte {
	if room := 4*maxLineShown - len(dst); room < len(p) {
		p = p[:max(room, 0)]
	}
	return append(dst, p...)
}

// snapshot returns the byte count and the latest line (the unfinished one if it has text).
func (m *outputMeter) snapshot() (int64, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if line := m.clean(m.partial); line != "" {
		return m.bytes, line
	}
	return m.bytes, m.last
}

// waitLine returns the latest line of a backend's long wait.
func (m *outputMeter) waitLine() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.waiting
}

// clean redacts, then makes a line printable.
func (m *outputMeter) clean(b []byte) string {
	if m.redact != nil {
		b = []byte(m.redact(string(b)))
	}
	return cleanLine(b)
}

// cleanLine makes a line printable: valid UTF-8, no control characters (a carriage return
// keeps only what follows it, as a terminal would show), at most maxLineShown bytes.
func cleanLine(b []byte) string {
	s := string(b)
	if i := strings.LastIndexByte(strings.TrimRight(s, "\r"), '\r'); i >= 0 {
		s = s[i+1:]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r == '\t' {
			return ' '
		}
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > maxLineShown {
		cut := maxLineShown
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// startProgress sends a progress notification every second while a command runs, if the
// client asked for them with a progress token. Progress counts the seconds elapsed (it must
// grow with every notification); the message gives the output byte count and the latest line.
// The returned stop ends the notifications and waits for the sender; it may be called again.
func startProgress(ctx context.Context, req *mcp.CallToolRequest, meter *outputMeter, what string) (stop func()) {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return func() {}
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			msg := fmt.Sprintf("%s for %s", what, time.Since(start).Round(time.Second))
			if meter != nil {
				nb, line := meter.snapshot()
				msg += fmt.Sprintf(", %d bytes of output", nb)
				if line != "" {
					msg += ": " + line
				} else if w := meter.waitLine(); w != "" && nb == 0 {
					msg += "; " + w
				}
			}
			// A failed notification only means the client will not see this one.
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: tok, Progress: float64(n), Message: msg})
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}
