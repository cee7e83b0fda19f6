package handoff

import (
	"fmt"
	"syscall"
)

// ipprotoMPTCP is IPPROTO_MPTCP, which package syscall does not name.
const ipprotoMPTCP = 262

// checkProtocol reports why stream socket fd is not TCP. Go's listeners are multipath TCP
// where the kernel has it, and so may be what they accept.
func checkProtocol(fd int) error {
	if proto, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_PROTOCOL); err != nil || proto != syscall.IPPROTO_TCP && proto != ipprotoMPTCP {
		return fmt.Errorf("handed a stream socket of protocol %d, not TCP", proto)
	}
	return nil
}
