package sandbox

import "context"

// EphemeralOpener is a backend that can open a session on a sandbox of its own, disposed of
// when the session is closed: removed, or (a warm pool's) made as it was when fresh and kept
// for the next ephemeral session. The caller then removes nothing itself. name is for
// messages and records; no other session finds the sandbox by it.
type EphemeralOpener interface {
	OpenEphemeral(ctx context.Context, name string) (Session, error)
}
