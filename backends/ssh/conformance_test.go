//go:build unix

package ssh

import (
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	d := newTestSSHD(t)
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend { return d.backend(t, Options{}) },
	})
}

func TestConformanceShellFallback(t *testing.T) {
	d := newTestSSHD(t)
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend:      func(t testing.TB) sandbox.Backend { return d.backend(t, Options{ForceShell: true}) },
		StateSavedWhole: "the plain-shell fallback saves a session's state whole after each command (internal/shellwrap), so overlapping commands can overwrite each other's cd and export",
	})
}
