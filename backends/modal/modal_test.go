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
	})
}
