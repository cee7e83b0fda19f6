//go:build unix

package vercel

import (
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// TestConformanceFake runs the whole suite through the backend's real code (credentials,
// sandbox lifecycle, helper upload with fs/write, the helper on the PTY WebSocket, files
// through fs/read and fs/write) against the fake Vercel API; the suite runs every check
// again behind the policy gate itself.
func TestConformanceFake(t *testing.T) {
	s := newSetup(t)
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend { return s.backend(t, nil) },
		// Each session is a container created through the engine: slow on a loaded machine.
		Slow: 2,
		// The helper's PTY session outlives the client: a gone caller is noticed when its
		// heartbeat stops.
		CallerGoneAfter: agent.BeatTimeout,
		// A Vercel snapshot stops the VM (branch.go): the source resumes, its processes do not.
		ForkStopsSource: "a Vercel snapshot stops the source's VM: it resumes with its files and shell state, but its running processes end",
	})
}
