//go:build unix

package docker

import (
	"syscall"

	"github.com/moby/moby/api/types/container"
	"golang.org/x/sys/unix"
)

// podmanLimits are the open files and processes a sandbox on Podman may have: enough for
// any build, and below the hard limits of ordinary hosts (Debian's default nproc for root in
// a container is 32768 on some).
var podmanLimits = []struct {
	name     string
	resource int
	max      uint64
}{{"nofile", syscall.RLIMIT_NOFILE, 65536}, {"nproc", unix.RLIMIT_NPROC, 16384}}

// podmanUlimits are podmanLimits, lowered to this host's hard limits: a local Podman refuses
// a container whose limits exceed its own.
func podmanUlimits() []container.Ulimit {
	var out []container.Ulimit
	for _, l := range podmanLimits {
		n := l.max
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(l.resource, &lim); err == nil && lim.Max < n {
			n = lim.Max
		}
		out = append(out, container.Ulimit{Name: l.name, Soft: int64(n), Hard: int64(n)})
	}
	return out
}
