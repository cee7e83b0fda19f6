package kubernetes

import (
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// TestConformance runs the whole conformance suite through the backend, client-go, a real
// kube-apiserver (which admits each pod under the restricted Pod Security profile) and the
// real SPDY executor, against the fake node's exec endpoint backed by docker containers.
func TestConformance(t *testing.T) {
	c := newCluster(t)
	state := t.TempDir()
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend { return c.backend(t, state, nil) },
	})
}
