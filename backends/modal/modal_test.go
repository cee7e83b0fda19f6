package modal

import (
	"testing"
	"time"

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
		CallerGoneSurvives: "the helper runs in a Modal container exec that outlives the client's connection: it ends on the stdin EOF a graceful close sends, " +
			"which a killed caller never sends and a close racing the SDK client's own close can lose (a heartbeat from client to helper would end it; not built yet)",
	})
}
