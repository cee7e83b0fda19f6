package cli

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// syncWriter serialises writes to the CLI's stderr.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer // guarded by mu
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// underlying is the writer a syncWriter wraps (w itself otherwise), for terminal checks.
func underlying(w io.Writer) io.Writer {
	if s, ok := w.(*syncWriter); ok {
		return s.w
	}
	return w
}

// slowNotice says what is going on when a step takes longer than after: the notice on stderr
// once that time has passed, and how long the step took when stop is called. A quick step
// prints nothing.
func (a *app) slowNotice(what string, after time.Duration) (stop func()) {
	start := time.Now()
	var mu sync.Mutex
	shown, stopped := false, false
	t := time.AfterFunc(after, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			shown = true
			fmt.Fprintf(a.stderr, "hermes-sandbox: %s…\n", what)
		}
	})
	return func() {
		t.Stop()
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if shown {
			fmt.Fprintf(a.stderr, "hermes-sandbox: ready in %.1f s\n", time.Since(start).Seconds())
		}
	}
}
