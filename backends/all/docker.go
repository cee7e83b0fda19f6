//go:build !no_docker

package all

import (
	"github.com/hermes-sandbox/hermes-sandbox/backends/docker"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func newDocker(c cfg, o opts) (backend, error) {
	if n := c.Docker.EffectiveNetwork(); n != config.NetworkAllowlist {
		if err := egress.RefuseBrokering(c, "docker", "docker.network is "+string(n)+", not allowlist (no egress proxy runs)"); err != nil {
			return nil, err
		}
	}
	g, err := egress.BrokeringOf(c, o.Environ)
	if err != nil {
		return nil, err
	}
	// A session owner or MCP server outlives edits of the configuration: its proxies follow them.
	g.Live = egress.NewLive(c, o.Environ, "docker", func(c *config.Config) []string { return c.Docker.EgressAllow }, g.Secrets)
	return sandbox.AsBackend(docker.NewWith(c.Docker, o, docker.Options{Brokering: g}))
}
