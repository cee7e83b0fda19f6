//go:build !windows

package local_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// The local suites run side by side (each with its own state and working tree): their checks
// mostly wait, and go test's -parallel bounds them all together.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance(t, config.ConfineAuto, "")
}

// TestConformanceNetworkNone runs the suite in namespaces with a network of loopback only.
func TestConformanceNetworkNone(t *testing.T) {
	t.Parallel()
	egressNetwork(t)
	conformance(t, config.ConfineStrict, config.LocalNetworkNone)
}

// TestConformanceAllowlist runs the suite with the egress relay and proxy in place.
func TestConformanceAllowlist(t *testing.T) {
	t.Parallel()
	egressNetwork(t)
	conformance(t, config.ConfineAuto, config.LocalNetworkAllowlist)
}

func conformance(t *testing.T, mode config.Confine, network config.LocalNetwork) {
	// The tool's state lives apart from the working directory, as it does for a real user: the
	// helper makes it read-only to commands where the kernel can.
	// It is kept out of /tmp, where the suite writes its scratch files: the directories on the
	// way to a protected tree accept no new entries from confined commands.
	root, err := os.MkdirTemp("/var/tmp", "hermes-local-conf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	state, work := filepath.Join(root, "state"), filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend {
			cfg := config.NewConfig()
			cfg.Terminal.Cwd = work
			cfg.Local.Confine, cfg.Local.Network = mode, network
			b, err := local.NewWith(local.SectionOf(cfg), cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state,
				Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root, "SECRET_TOKEN=nope"}}))
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Parallel: true,
		// Local sessions share the working tree; a fork gets a copy of its own (branch.go).
		BranchOwnDir: "a local fork or restored session works in its own copy of the tree, beside the state directory",
	})
}
