package daytona

// Branching (issue #28) is not claimed on daytona, and the backend does not implement
// sandbox.Brancher, so the gate and the CLI answer ErrUnsupported.
//
// Why, from the vendor contract (../shared/specs/daytona/api-openapi.yaml, v0.190.0): the
// control plane has POST /sandbox/{id}/snapshot (createSandboxSnapshot) and
// POST /sandbox/{id}/fork (forkSandbox), but both only say that the operation "has been
// initiated" and return the Sandbox, whose state passes through "snapshotting" or
// "forking". The one rule the document gives is on CreateSandboxSnapshot.includeMemory:
// without memory, VM sandboxes must be STOPPED, and container sandboxes have no memory
// snapshots. Nothing says that a running sandbox's filesystem can be snapshotted while it
// keeps running, whether the source is stopped or paused meanwhile, when the snapshot is
// usable (no state to poll on the sandbox says it is done), or what a fork copies (files
// only, or memory and processes). Brancher promises a snapshot of a session that keeps
// running and a fork that leaves the source running; a fake that decided those points
// would be following our guess, not the contract. NoBranching says so in one sentence.

import (
	"fmt"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// NoBranching says why daytona sessions cannot be snapshotted, restored or forked here: an
// error wrapping sandbox.ErrUnsupported, for a caller (the gate, the CLI) to show.
func (b *Backend) NoBranching() error {
	return &sandbox.Error{Backend: Name, Op: "branch", Err: fmt.Errorf(
		"the Daytona API documents sandbox snapshots and forks only as operations \"initiated\", without saying whether a running "+
			"sandbox keeps running through them or when the result is usable (VM sandboxes must even be stopped first), "+
			"so this backend does not snapshot, restore or fork sessions; use docker, local, modal or vercel for that: %w",
		sandbox.ErrUnsupported)}
}
