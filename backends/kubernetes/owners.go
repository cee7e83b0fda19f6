package kubernetes

import "github.com/hermes-sandbox/hermes-sandbox/sandbox"

// RecordsOwners says the pods of an ephemeral process carry its ProcessOwner
// (annoOwnerProcess), so a sweep finds those of a process that is gone. A server restarted
// on another host (a new pod) cannot tell whether its predecessor runs: those pods are kept
// for gc's idle rule.
func (b *Backend) RecordsOwners() bool { return true }

var _ sandbox.OwnerRecorder = (*Backend)(nil)
