package sandbox

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestWaitReporter(t *testing.T) {
	var fallback, carried bytes.Buffer
	r := NewWaitReporter(context.Background(), &fallback, "kubernetes: ", "pod p", "1m0s (kubernetes.start_timeout)", 20*time.Millisecond)
	calls := 0
	why := func() string { calls++; return "not scheduled (Unschedulable)" }
	r.Tick(why)
	if fallback.Len() != 0 || calls != 0 {
		t.Fatalf("Tick before the interval reported %q (why called %d times)", fallback.String(), calls)
	}
	deadline := time.Now().Add(5 * time.Second)
	for fallback.Len() == 0 && time.Now().Before(deadline) {
		r.Tick(why)
		time.Sleep(time.Millisecond)
	}
	line := fallback.String()
	if !strings.HasPrefix(line, "kubernetes: waiting ") || !strings.Contains(line, "of 1m0s (kubernetes.start_timeout) for pod p: not scheduled (Unschedulable)\n") {
		t.Errorf("report = %q", line)
	}
	// The context's writer wins over the fallback.
	ctx := WithProgress(context.Background(), &carried)
	r = NewWaitReporter(ctx, &fallback, "", "sandbox s", "", time.Nanosecond)
	r.Tick(func() string { return "" })
	if got := carried.String(); !strings.HasPrefix(got, "waiting ") || !strings.HasSuffix(got, " for sandbox s\n") {
		t.Errorf("report through the context = %q", got)
	}
	var nilR *WaitReporter
	nilR.Tick(why) // no writer, no panic
	NewWaitReporter(context.Background(), nil, "", "x", "", time.Nanosecond).Tick(why)
}
