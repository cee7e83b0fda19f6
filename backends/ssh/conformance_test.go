//go:build unix

package ssh

import (
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// The two suites run side by side in the fast tier, each against its own sshd; their checks
// stay one at a time (see bf52c83).
func TestConformance(t *testing.T) {
	testenv.ParallelInFastTier(t)
	d := newTestSSHD(t)
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend { return d.backend(t, Options{}) },
	})
}

func TestConformanceShellFallback(t *testing.T) {
	testenv.ParallelInFastTier(t)
	d := newTestSSHD(t)
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend:      func(t testing.TB) sandbox.Backend { return d.backend(t, Options{ForceShell: true}) },
		StateSavedWhole: "the plain-shell fallback saves a session's state whole after each command (internal/shellwrap), so overlapping commands can overwrite each other's cd and export",
	})
}
