package channel

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// LogWriter sends a helper's stderr to a logger line by line and keeps its last lines, so a
// helper that fails to start can say why. A line longer than 4 KiB is logged in pieces.
type LogWriter struct {
	log   *slog.Logger
	level slog.Level
	msg   string

	mu   sync.Mutex
	buf  []byte   // guarded by mu
	last []string // guarded by mu
}

// tailLines is how many lines Tail keeps.
const tailLines = 5

// NewLogWriter logs each line as msg at level (a nil logger discards).
func NewLogWriter(log *slog.Logger, level slog.Level, msg string) *LogWriter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &LogWriter{log: log, level: level, msg: msg}
}

func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 4096 {
		w.line(string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

func (w *LogWriter) line(s string) {
	w.log.Log(context.Background(), w.level, w.msg, "line", s)
	if s = strings.TrimSpace(s); s == "" {
		return
	}
	w.last = append(w.last, s)
	if len(w.last) > tailLines {
		w.last = w.last[1:]
	}
}

// Flush logs an unfinished last line.
func (w *LogWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(string(w.buf))
		w.buf = nil
	}
}

// Tail returns the last lines written (an unfinished one included), joined by "; ".
func (w *LogWriter) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := slices.Clone(w.last)
	if s := strings.TrimSpace(string(w.buf)); s != "" {
		last = append(last, s)
	}
	return strings.Join(last, "; ")
}
