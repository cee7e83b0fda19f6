// Package all lists the built-in backends explicitly, so nothing registers itself through
// init side effects. Adding a backend is one Register line: its factory gets its own typed
// section of the configuration (see backends/README.md).
//
// Every backend but local can be left out of a slim build with a tag, containerd style:
// no_docker, no_ssh, no_singularity, no_modal, no_daytona, no_vercel, no_kubernetes (make
// slim). Each has a file built without its tag holding the real factory, and a no_NAME.go
// built with it whose factory says the backend was left out; the name stays registered, so
// choosing it (and doctor) gets that error rather than "unknown backend".
package all

import (
	"fmt"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/owner"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// cfg, opts and backend keep each factory on one line.
type (
	cfg     = *config.Config
	opts    = sandbox.FactoryOptions
	backend = sandbox.Backend
)

// Backends returns a registry of every backend built into this binary.
func Backends() *sandbox.Registry[*config.Config] {
	r := sandbox.NewRegistry[*config.Config]()
	r.Register(local.Name, newLocal)
	r.Register("docker", newDocker)
	r.Register("ssh", noBroker("ssh", "no egress proxy runs for it", newSSH))
	r.Register("singularity", noBroker("singularity", "no egress proxy runs for it", newSingularity))
	r.Register("modal", noBroker("modal", "no egress proxy runs for it", newModal))
	r.Register("daytona", noBroker("daytona", "no egress proxy runs for it", newDaytona))
	r.Register("vercel", noBroker("vercel", "no egress proxy of this tool runs for it", newVercel))
	r.Register("kubernetes", newKubernetes)
	return r
}

// leftOut is the factory of a backend a build tag left out.
func leftOut(name string) (backend, error) {
	return nil, fmt.Errorf("%s: not built into this binary; build without -tags no_%s: %w", name, name, sandbox.ErrInvalidConfig)
}

// linuxOnly is the factory's error for a backend that runs on Linux only, on goos.
func linuxOnly(name, goos string) error {
	return fmt.Errorf("%s: not available on this platform (%s): it runs on Linux only; "+
		"use the ssh backend to a Linux host that has it, or the docker backend: %w", name, goos, sandbox.ErrUnavailable)
}

// noBroker wraps the factory of a backend that cannot broker secrets: with secrets.broker
// entries it refuses to start rather than run without them or pass them in.
func noBroker(name, why string, f func(cfg, opts) (backend, error)) func(cfg, opts) (backend, error) {
	return func(c cfg, o opts) (backend, error) {
		if err := egress.RefuseBrokering(c, name, why); err != nil {
			return nil, err
		}
		return f(c, o)
	}
}

// newLocal builds local; brokered secrets need local.network allowlist (the proxy).
func newLocal(c cfg, o opts) (backend, error) {
	sec := localSection(c, o)
	if n := c.Local.EffectiveNetwork(c.Terminal.EgressAllow); n != config.LocalNetworkAllowlist {
		if err := egress.RefuseBrokering(c, local.Name, "local.network is "+string(n)+", not allowlist (no egress proxy runs)"); err != nil {
			return nil, err
		}
	}
	g, err := egress.BrokeringOf(c, o.Environ)
	if err != nil {
		return nil, err
	}
	g.Live = egress.NewLive(c, o.Environ, local.Name, func(c *config.Config) []string { return c.Local.EgressAllow }, g.Secrets)
	sec.Brokering = g
	return local.NewWith(sec, o)
}

// localSection is local's section with the session owners' directory to protect: a command
// that planted a socket there would answer for the gate.
func localSection(c cfg, o opts) local.Section {
	sec := local.SectionOf(c)
	if d, err := owner.Dir(o.Environ); err == nil {
		sec.Protect = append(sec.Protect, d)
	}
	return sec
}
