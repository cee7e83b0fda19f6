package sandbox

import (
	"context"
	"fmt"
	"io"
	"time"
)

type progressKey struct{}

// WithProgress returns ctx carrying w: a backend's long waits during calls made with it (a
// pod waiting for a node, a sandbox being created) report there, ahead of
// FactoryOptions.Progress. The MCP server passes one per tool call, so a client sees why its
// command has not started.
func WithProgress(ctx context.Context, w io.Writer) context.Context {
	return context.WithValue(ctx, progressKey{}, w)
}

// ProgressWriter returns ctx's progress writer, else fallback, else nil.
func ProgressWriter(ctx context.Context, fallback io.Writer) io.Writer {
	if w, ok := ctx.Value(progressKey{}).(io.Writer); ok && w != nil {
		return w
	}
	return fallback
}

// DefaultWaitReport is how often a long wait says what it waits for.
const DefaultWaitReport = 5 * time.Second

// WaitReporter says every so often what a long wait is waiting for and why, so no wait is
// silent: "kubernetes: waiting 10s of 5m0s (kubernetes.start_timeout) for pod p: phase
// Pending, not scheduled (Unschedulable): …". Its zero value and a nil one report nothing.
type WaitReporter struct {
	w      io.Writer
	prefix string // "kubernetes: "
	what   string // "pod p"
	limit  string // "5m0s (kubernetes.start_timeout)"
	every  time.Duration
	start  time.Time
	next   time.Time // when the next report is due
}

// NewWaitReporter reports to ctx's progress writer, else fallback (nil: to nobody) every
// interval (0 = DefaultWaitReport).
func NewWaitReporter(ctx context.Context, fallback io.Writer, prefix, what, limit string, every time.Duration) *WaitReporter {
	if every <= 0 {
		every = DefaultWaitReport
	}
	now := time.Now()
	return &WaitReporter{w: ProgressWriter(ctx, fallback), prefix: prefix, what: what, limit: limit, every: every,
		start: now, next: now.Add(every)}
}

// Tick reports why (called only when a report is due) if the interval has passed since the
// wait began or since the last report. One wait loop calls it; it is not for concurrent use.
func (r *WaitReporter) Tick(why func() string) {
	if r == nil || r.w == nil {
		return
	}
	now := time.Now()
	if now.Before(r.next) {
		return
	}
	r.next = now.Add(r.every)
	line := fmt.Sprintf("%swaiting %s", r.prefix, now.Sub(r.start).Round(time.Second))
	if r.limit != "" {
		line += " of " + r.limit
	}
	line += " for " + r.what
	if s := why(); s != "" {
		line += ": " + s
	}
	fmt.Fprintln(r.w, line)
}
