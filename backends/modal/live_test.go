//go:build unix

package modal

import (
	"os"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// TestLiveConformance runs the suite against real Modal when MODAL_TOKEN_ID and
// MODAL_TOKEN_SECRET are set (it creates short-lived sandboxes in app hermes-sandbox-test).
func TestLiveConformance(t *testing.T) {
	id, secret := os.Getenv("MODAL_TOKEN_ID"), os.Getenv("MODAL_TOKEN_SECRET")
	if id == "" || secret == "" {
		testenv.Missing(t, "modal", "MODAL_TOKEN_ID and MODAL_TOKEN_SECRET are not set, so real Modal cannot be reached")
	}
	testenv.AgentBinary(t)
	state := t.TempDir()
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend {
			cfg := config.NewConfig()
			cfg.Modal.TokenID, cfg.Modal.TokenSecret = config.Secret(id), config.Secret(secret)
			cfg.Modal.App = "hermes-sandbox-test"
			cfg.Modal.Timeout = 20 * time.Minute
			cfg.Modal.IdleTimeout = 5 * time.Minute
			cfg.Modal.ServerURL = os.Getenv("MODAL_SERVER_URL")
			b, err := NewWith(cfg.Modal, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state, Environ: os.Environ()}), Options{})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Slow: 5,
	})
}
