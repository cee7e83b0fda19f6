//go:build !no_kubernetes

package all

import (
	"github.com/hermes-sandbox/hermes-sandbox/backends/kubernetes"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// newKubernetes passes the egress section (egress.hosts, egress.allow_private) to the
// backend's proxy; secrets.broker was refused before this for kubernetes.
func newKubernetes(c cfg, o opts) (backend, error) {
	g, err := egress.BrokeringOf(c, o.Environ)
	if err != nil {
		return nil, err
	}
	g.Secrets = nil
	return sandbox.AsBackend(kubernetes.NewWith(c.Kubernetes, o, kubernetes.Options{Egress: g}))
}
