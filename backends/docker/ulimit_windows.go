package docker

import "github.com/moby/moby/api/types/container"

// podmanUlimits: a Podman reached from Windows is never local (its pipe is not a unix://
// socket), so nothing asks for host-bounded limits.
func podmanUlimits() []container.Ulimit { return nil }
