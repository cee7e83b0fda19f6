//go:build unix

package modal

import (
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// TestConformance runs the whole suite through the real SDK against the fake Modal.
func TestConformance(t *testing.T) {
	f := newFake(t)
	state := t.TempDir()
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend { return newBackend(t, f, state, nil) },
		Slow:       2 * time.Second / time.Second,
		// The helper's container exec can outlive a client that did not close it: a gone
		// caller is then noticed when its heartbeat stops.
		CallerGoneAfter: agent.BeatTimeout,
	})
}
