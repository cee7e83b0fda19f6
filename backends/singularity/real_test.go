//go:build !windows

package singularity

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// realBackend returns a factory for backends on the real apptainer (or singularity) of this
// host, or skips: HERMES_SANDBOX_TEST_REQUIRE=singularity turns the skip into a failure. The
// image is $HERMES_SANDBOX_TEST_SINGULARITY_IMAGE (a SIF path or a docker:// reference),
// else docker://busybox:1.36, converted once into the test's state directory.
func realBackend(t *testing.T) func(t testing.TB) sandbox.Backend {
	t.Helper()
	found := false
	for _, name := range []string{"apptainer", "singularity"} {
		if _, err := exec.LookPath(name); err == nil {
			found = true
		}
	}
	if !found {
		testenv.Missing(t, "singularity", "neither apptainer nor singularity is on PATH")
	}
	testenv.AgentBinary(t)
	image := os.Getenv("HERMES_SANDBOX_TEST_SINGULARITY_IMAGE")
	if image == "" {
		image = "docker://busybox:1.36"
	}
	state := t.TempDir()
	return func(t testing.TB) sandbox.Backend {
		cfg := config.NewConfig()
		cfg.Singularity.Image = image
		b, err := New(cfg.Singularity, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state, Environ: []string{"SECRET_TOKEN=nope"}}))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func TestRealConformance(t *testing.T) {
	newBackend := realBackend(t)
	sandboxtest.Run(t, sandboxtest.Options{NewBackend: newBackend})
}

// TestRealHardening checks the isolation flags from inside a real instance.
func TestRealHardening(t *testing.T) {
	newBackend := realBackend(t)
	b := newBackend(t).(*Backend)
	t.Cleanup(func() { b.Close() })
	if err := b.Check(ctxFor(t)); err != nil {
		t.Fatalf("Check() = %v", err)
	}
	s := open(t, b, "hardening")
	t.Cleanup(func() { b.Remove(ctxFor(t), "hardening") })
	tests := []struct{ script, want string }{
		{"ls /sys/class/net", "lo\n"}, // --network none: loopback only
		{`echo "${SECRET_TOKEN-none}"`, "none\n"},
		{"pwd", "/workspace\n"},
		{"touch /.hermes/x 2>/dev/null && echo writable || echo ro", "ro\n"},
		{"grep CapEff /proc/self/status | tr -d ' \\t'", "CapEff:0000000000000000\n"},
	}
	for _, tt := range tests {
		if res := mustExec(t, s, tt.script); res.Stdout != tt.want {
			t.Errorf("Exec(%q) = %q (stderr %q); want %q", tt.script, res.Stdout, strings.TrimSpace(res.Stderr), tt.want)
		}
	}
}
