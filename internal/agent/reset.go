package agent

import "context"

// ResetRequest asks the helper of a warm pool's container to make the sandbox as it was when
// fresh, so that the pool can hand it to the next task instead of removing it (opReset). The
// commands of a task run as the helper's own user, so the helper can end every one of them
// and remove everything they wrote; what it cannot make fresh it reports, and the pool then
// removes the container.
type ResetRequest struct {
	// Probe is the first reset, in a container where nothing has run but the helper: it notes
	// the session state to come back to, stops the commands of later tasks (same user) from
	// tracing or reading this process, and reports every Wipe directory that holds more than
	// the helper's own state (a workspace the image fills cannot be made fresh by emptying).
	Probe bool `json:"probe,omitempty"`
	// Wipe are the directories emptied: the workspace, /tmp, /dev/shm, /dev/mqueue, $HOME.
	Wipe []string `json:"wipe"`
	// Skip are mount points left out of the fingerprint (volumes shared on purpose).
	Skip []string `json:"skip,omitempty"`
}

// ResetReply is what a reset found.
type ResetReply struct {
	// Fingerprint lists every mount and every entry of every writable mount after the reset
	// (type, permissions, owner, size, a hash of a file's content, extended attribute names):
	// the pool takes a container back only if it equals the probe's.
	Fingerprint []string `json:"fingerprint"`
	// Problems lists what could not be made fresh; any problem means the container goes.
	Problems []string `json:"problems,omitempty"`
}

// Reset asks the helper to make its sandbox fresh (see ResetRequest). Only a helper
// exec'd into a pool container (whose PID 1 is `sandbox-agent idle`) agrees to it.
func (c *Client) Reset(ctx context.Context, req ResetRequest) (ResetReply, error) {
	var rep ResetReply
	err := c.Call(ctx, CallRequest{Op: opReset, Reset: &req}, &rep, nil, nil)
	return rep, err
}
