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
	r.Register(local.Name, func(c cfg, o opts) (backend, error) { return local.NewWith(localSection(c, o), o) })
	r.Register("docker", newDocker)
	r.Register("ssh", newSSH)
	r.Register("singularity", newSingularity)
	r.Register("modal", newModal)
	r.Register("daytona", newDaytona)
	r.Register("vercel", newVercel)
	r.Register("kubernetes", newKubernetes)
	return r
}

// leftOut is the factory of a backend a build tag left out.
func leftOut(name string) (backend, error) {
	return nil, fmt.Errorf("%s: not built into this binary; build without -tags no_%s: %w", name, name, sandbox.ErrInvalidConfig)
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
