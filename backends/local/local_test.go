package local_test

import (
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	state := t.TempDir()
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend {
			cfg := config.NewConfig()
			cfg.Terminal.Cwd = state
			b, err := local.New(cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state,
				Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + state, "SECRET_TOKEN=nope"}}))
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	})
}
