// Package all lists the built-in backends explicitly, so nothing registers itself through
// init side effects. Adding a backend is one Register line: its factory gets its own typed
// section of the configuration (see backends/README.md).
package all

import (
	"github.com/hermes-sandbox/hermes-sandbox/backends/daytona"
	"github.com/hermes-sandbox/hermes-sandbox/backends/docker"
	"github.com/hermes-sandbox/hermes-sandbox/backends/kubernetes"
	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/backends/modal"
	"github.com/hermes-sandbox/hermes-sandbox/backends/singularity"
	"github.com/hermes-sandbox/hermes-sandbox/backends/ssh"
	"github.com/hermes-sandbox/hermes-sandbox/backends/vercel"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/owner"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// cfg and opts keep each registration on one line.
type (
	cfg  = *config.Config
	opts = sandbox.FactoryOptions
)

// Backends returns a registry of every backend built into this binary.
func Backends() *sandbox.Registry[*config.Config] {
	r := sandbox.NewRegistry[*config.Config]()
	r.Register(local.Name, func(c cfg, o opts) (sandbox.Backend, error) { return local.NewWith(localSection(c, o), o) })
	r.Register(docker.Name, func(c cfg, o opts) (sandbox.Backend, error) { return docker.New(c.Docker, o) })
	r.Register(ssh.Name, func(c cfg, o opts) (sandbox.Backend, error) { return ssh.New(c.SSH, o) })
	r.Register(singularity.Name, func(c cfg, o opts) (sandbox.Backend, error) { return singularity.New(c.Singularity, o) })
	r.Register(modal.Name, func(c cfg, o opts) (sandbox.Backend, error) { return modal.New(c.Modal, o) })
	r.Register(daytona.Name, func(c cfg, o opts) (sandbox.Backend, error) { return daytona.New(c.Daytona, o) })
	r.Register(vercel.Name, func(c cfg, o opts) (sandbox.Backend, error) { return vercel.New(c.Vercel, o) })
	r.Register(kubernetes.Name, func(c cfg, o opts) (sandbox.Backend, error) { return kubernetes.New(c.Kubernetes, o) })
	return r
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
