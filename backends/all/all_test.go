package all

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestLocalSectionProtectsOwners checks that local is told to protect the session owners'
// sockets, which it no longer works out for itself.
func TestLocalSectionProtectsOwners(t *testing.T) {
	state := t.TempDir()
	o := sandbox.FactoryOptions{Environ: []string{"HOME=/nonexistent", "HERMES_SANDBOX_TERMINAL_STATE_DIR=" + state}}
	sec := localSection(config.NewConfig(), o)
	if want := filepath.Join(state, "owners"); !slices.Contains(sec.Protect, want) {
		t.Errorf("localSection(%v).Protect = %q; want it to hold %q", o.Environ, sec.Protect, want)
	}
	want := local.SectionOf(config.NewConfig()).Protect
	if sec := localSection(config.NewConfig(), sandbox.FactoryOptions{}); !slices.Equal(sec.Protect, want) {
		t.Errorf("localSection without HOME: Protect = %q; want %q", sec.Protect, want)
	}
}
