//go:build unix

package vercel

import (
	"os"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// TestConformanceLive runs the suite against the real Vercel Sandbox API when credentials
// are in the environment: VERCEL_TOKEN with HERMES_SANDBOX_VERCEL_TEAM_ID and
// HERMES_SANDBOX_VERCEL_PROJECT_ID, or VERCEL_OIDC_TOKEN. It creates (and removes) real
// sandboxes, tagged hermes-sandbox=1.
func TestConformanceLive(t *testing.T) {
	if os.Getenv("VERCEL_TOKEN") == "" && os.Getenv("VERCEL_OIDC_TOKEN") == "" {
		t.Skip("skipping: set VERCEL_TOKEN (with HERMES_SANDBOX_VERCEL_TEAM_ID and HERMES_SANDBOX_VERCEL_PROJECT_ID) or VERCEL_OIDC_TOKEN to run the suite against Vercel")
	}
	testenv.AgentBinary(t)
	state := t.TempDir()
	sandboxtest.Run(t, sandboxtest.Options{
		Slow: 5,
		NewBackend: func(t testing.TB) sandbox.Backend {
			cfg := config.NewConfig()
			cfg.Vercel.TeamID = os.Getenv("HERMES_SANDBOX_VERCEL_TEAM_ID")
			cfg.Vercel.ProjectID = os.Getenv("HERMES_SANDBOX_VERCEL_PROJECT_ID")
			if u := os.Getenv("HERMES_SANDBOX_VERCEL_API_URL"); u != "" {
				cfg.Vercel.APIURL = u
			}
			b, err := NewWith(cfg.Vercel, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state, Environ: os.Environ()}), Options{})
			if err != nil {
				t.Fatalf("NewWith() = %v", err)
			}
			return b
		},
	})
}
