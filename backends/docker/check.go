package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Check tells quickly whether docker sessions can run here: the engine answers, the helper
// binary exists, the configuration is sound, the image is present (a missing image wraps
// sandbox.ErrNotFound), and the engine can apply the hardening the configuration asks for.
func (b *Backend) Check(ctx context.Context) error {
	if _, err := b.cli.Ping(ctx, client.PingOptions{}); err != nil {
		return b.engineErr("ping", "", err)
	}
	if err := b.prepare(ctx); err != nil {
		return err
	}
	if err := b.validate(); err != nil {
		return &sandbox.Error{Backend: Name, Op: "check", Err: err}
	}
	if _, err := b.cli.ImageInspect(ctx, b.image()); err != nil {
		if cerrdefs.IsNotFound(err) {
			return b.imageMissing(ctx, err)
		}
		return b.engineErr("inspect image", b.image(), err)
	}
	if _, err := b.userIDs(ctx); err != nil {
		return err
	}
	res, err := b.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return b.engineErr("info", "", err)
	}
	info := res.Info
	var missing []string
	if b.cfg.MemoryLimit > 0 && !info.MemoryLimit {
		missing = append(missing, "memory limits (docker.memory_limit)")
	}
	if b.cfg.PidsLimit > 0 && !info.PidsLimit {
		missing = append(missing, "pids limits (docker.pids_limit)")
	}
	if b.cfg.CPUQuota > 0 && !info.CPUCfsQuota {
		missing = append(missing, "CPU quotas (docker.cpu_quota)")
	}
	if len(missing) > 0 {
		return &sandbox.Error{Backend: Name, Op: "check", Err: fmt.Errorf("the engine cannot enforce %v on this host (its cgroups lack them): fix the host, or set those keys to 0 to run without: %w",
			missing, sandbox.ErrUnavailable)}
	}
	if b.diskLimit() > 0 {
		if err := b.disksSeen(); err != nil {
			return &sandbox.Error{Backend: Name, Op: "check", Err: err}
		}
	}
	if b.cfg.Runtime != "" {
		if _, ok := info.Runtimes[b.cfg.Runtime]; !ok {
			var names []string
			for n := range info.Runtimes {
				names = append(names, n)
			}
			return &sandbox.Error{Backend: Name, Op: "check", Err: fmt.Errorf("docker.runtime %q is not registered with the engine (it has %v): install it (for gVisor "+
				"on Debian: apt-get install runsc) or clear docker.runtime: %w",
				b.cfg.Runtime, names, sandbox.ErrInvalidConfig)}
		}
	}
	return nil
}
