//go:build !windows

package singularity

import (
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// TestConformanceFakeRuntime runs the whole conformance suite through the backend's real
// code (instance lifecycle, helper process, env file, records) with only the container
// runtime faked, because no apptainer can be installed here. The helper then runs on this
// host, in the fake instance's directory under a temporary directory, in a private mount
// namespace where /mnt is the instance's own scratch directory. Scratch must be a directory
// right under "/", private to the sandbox: the suite's gate check refuses `rm -rf
// SCRATCH/../*` because it reaches "/", and with a host temporary directory as Scratch that
// command is no longer hardline and really runs, deleting the test's temporary root.
func TestConformanceFakeRuntime(t *testing.T) {
	setup := newFakeSetup(t)
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend { return setup.backend(t) },
		Scratch:    "/mnt",
		// Each check's sessions are instances of their own (own directory, own /tmp, own
		// process marker), so the checks run side by side.
		Parallel: true,
	})
}
