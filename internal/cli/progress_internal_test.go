//go:build unix

package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestSlowNotice(t *testing.T) {
	var buf bytes.Buffer
	a := &app{stderr: &syncWriter{w: &buf}}
	stop := a.slowNotice("starting session s", 10*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.stderr.(*syncWriter).mu.Lock()
		got := buf.String()
		a.stderr.(*syncWriter).mu.Unlock()
		if strings.Contains(got, "starting session s…") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a slow step printed no notice: %q", got)
		}
		time.Sleep(5 * time.Millisecond) // polling the buffer, not waiting for the timer
	}
	stop()
	if !strings.Contains(buf.String(), "ready in") {
		t.Errorf("the end of a slow step is not reported: %q", buf.String())
	}

	buf.Reset()
	a.slowNotice("quick", time.Hour)()
	if buf.Len() != 0 {
		t.Errorf("a quick step printed %q", buf.String())
	}
}
