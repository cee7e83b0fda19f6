//go:build !no_kubernetes

package all

import (
	"github.com/hermes-sandbox/hermes-sandbox/backends/kubernetes"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// newKubernetes passes the egress section (egress.hosts, egress.allow_private) and the
// brokered secrets to the backend's proxy, which runs with kubernetes.network allowlist only.
func newKubernetes(c cfg, o opts) (backend, error) {
	if n := c.Kubernetes.EffectiveNetwork(); n != config.NetworkAllowlist {
		if err := egress.RefuseBrokering(c, "kubernetes", "kubernetes.network is "+string(n)+", not allowlist (no egress proxy runs)"); err != nil {
			return nil, err
		}
	}
	g, err := egress.BrokeringOf(c, o.Environ)
	if err != nil {
		return nil, err
	}
	g.Live = egress.NewLive(c, o.Environ, "kubernetes", func(c *config.Config) []string { return c.Kubernetes.EgressAllow }, g.Secrets)
	return sandbox.AsBackend(kubernetes.NewWith(c.Kubernetes, o, kubernetes.Options{Egress: g}))
}
