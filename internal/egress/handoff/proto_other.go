//go:build unix && !linux

package handoff

// checkProtocol has nothing to add off Linux: there is no SO_PROTOCOL, and a stream socket
// with an IPv4 or IPv6 address (which check requires next) is TCP.
func checkProtocol(fd int) error { return nil }
