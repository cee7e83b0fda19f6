// Package all lists the built-in backends explicitly, so nothing registers itself through
// init side effects.
package all

import (
	"github.com/hermes-sandbox/hermes-sandbox/backends/docker"
	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/backends/singularity"
	"github.com/hermes-sandbox/hermes-sandbox/backends/ssh"
	"github.com/hermes-sandbox/hermes-sandbox/backends/vercel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Backends returns a registry of every backend built into this binary.
func Backends() *sandbox.Registry {
	r := sandbox.NewRegistry()
	r.Register(local.Name, local.New)
	r.Register(docker.Name, docker.New)
	r.Register(ssh.Name, ssh.New)
	r.Register(singularity.Name, singularity.New)
	r.Register(vercel.Name, vercel.New)
	return r
}
