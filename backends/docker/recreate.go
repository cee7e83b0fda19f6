package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// staleNote is the line a command of a session whose container was made from other
// settings gets on its stderr ("" when it uses the current ones). It comes with every
// command until the session is removed or recreated, so no call misses it.
func (s *session) staleNote() string {
	s.mu.Lock()
	stale := s.stale
	s.mu.Unlock()
	if len(stale) == 0 {
		return ""
	}
	return fmt.Sprintf("hermes-sandbox: session %s keeps its running sandbox, which does not use the current %s; "+
		"they apply to new sessions (`hermes-sandbox exec --recreate --session %s` or `hermes-sandbox sessions rm %s` to use them)\n",
		s.name, strings.Join(stale, ", "), s.name, s.name)
}

// Recreate gives session a new container made from the current settings. The new container
// is created (under the session's name, the old one renamed aside) before the old one is
// removed, so a failure (a missing image, say) leaves the session as it was. The workspace
// volume carries over; the shell state, /tmp and background jobs do not, and the next
// command reports environment_recreated. A session without a container is left alone: its
// next command creates one from the current settings anyway.
func (b *Backend) Recreate(ctx context.Context, session string) error {
	if err := sandbox.CheckOpen(Name, session, b.isClosed(), b.validate); err != nil {
		return err
	}
	if err := b.prepare(ctx); err != nil {
		return err
	}
	name := b.containerName(session)
	old, err := b.inspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return b.engineErr("inspect", name, err)
	}
	aside := name + "-old-" + sandbox.RandomHex(4)
	if _, err := b.cli.ContainerRename(ctx, old.ID, client.ContainerRenameOptions{NewName: aside}); err != nil {
		return b.engineErr("rename", name, err)
	}
	id, err := b.create(ctx, name, roleSession, session)
	if errors.Is(err, errNameTaken) {
		// Another process made the session a container meanwhile, from its settings.
		err = &sandbox.Error{Backend: Name, Op: "recreate", ID: name,
			Err: errors.New("another process created the session's container while it was being replaced; try again")}
	}
	if err != nil {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if _, rerr := b.cli.ContainerRename(cctx, old.ID, client.ContainerRenameOptions{NewName: name}); rerr != nil {
			return errors.Join(err, b.engineErr("rename back", aside, rerr))
		}
		return err
	}
	// The session's record keeps the old container's id, so its next command (in any
	// process) reports environment_recreated.
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if err := b.removeContainer(cctx, old.ID, false); err != nil {
		return fmt.Errorf("the session has its new container, but the old one stays: %w", err)
	}
	b.log.Info("session's container recreated from the current settings", "session", session, "old", shortID(old.ID), "new", shortID(id))
	return nil
}

var _ sandbox.Recreator = (*Backend)(nil)
