//go:build !linux

package daemon

import "net"

// samePeer accepts no peer off Linux: an owner verifies its callers through /proc (see
// owner.Supported), so none serves there and a connection is closed unanswered.
func samePeer(c *net.UnixConn) (int, bool) { return 0, false }
