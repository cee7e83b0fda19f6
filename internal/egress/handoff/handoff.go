// Package handoff passes the connections a sandbox's egress relay accepts to the filtering
// proxy on the host, over a unix socket with SCM_RIGHTS: the proxy then reads and writes
// the sandbox's own TCP socket, so the relay is out of the data path and each byte crosses
// the kernel twice (client → proxy → server) instead of three times (client → relay →
// proxy → server). It has no dependencies beyond the standard library, because the
// relay's side is linked into the in-sandbox helper.
//go:build unix

package handoff

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// Send hands c to the proxy listening on uc. The caller still closes its own c afterwards:
// the proxy holds its own descriptor of the same socket.
func Send(uc *net.UnixConn, c *net.TCPConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	err = raw.Control(func(fd uintptr) {
		_, _, werr = uc.WriteMsgUnix([]byte{1}, syscall.UnixRights(int(fd)), nil)
	})
	if err != nil {
		return err
	}
	return werr
}

// maxPerMessage bounds the descriptors read with one message: Send sends one, and a
// sandbox that sends more has them closed unused.
const maxPerMessage = 8

// Receive reads the connections sent on uc with Send until uc ends, handing each to serve.
// Whatever arrives is the sandbox's to choose, so only a connected TCP socket is accepted;
// any other descriptor (a file, a pipe, a listening socket) is closed unused and reported to
// reject, if not nil. Receive returns nil when the sender closes uc.
func Receive(uc *net.UnixConn, serve func(net.Conn), reject func(error)) error {
	buf := make([]byte, 64)
	oob := make([]byte, syscall.CmsgSpace(4*maxPerMessage))
	for {
		n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
		if oobn > 0 {
			for _, c := range adoptAll(oob[:oobn], reject) {
				serve(c)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if flags&syscall.MSG_CTRUNC != 0 && reject != nil {
			reject(errors.New("more descriptors than one message may carry: the extra ones were dropped"))
		}
		if n == 0 && oobn == 0 {
			return nil
		}
	}
}

// adoptAll turns the descriptors in a control message into connections; the ones that are
// not connected TCP sockets are closed.
func adoptAll(oob []byte, reject func(error)) []net.Conn {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		if reject != nil {
			reject(err)
		}
		return nil
	}
	var out []net.Conn
	for i := range msgs {
		fds, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue // not SCM_RIGHTS (credentials): nothing to close
		}
		for _, fd := range fds {
			c, err := adopt(fd)
			if err != nil {
				if reject != nil {
					reject(err)
				}
				continue
			}
			out = append(out, c)
		}
	}
	return out
}

// adopt returns the connection for fd, which it owns: a connected TCP stream socket, or an
// error with fd closed.
func adopt(fd int) (net.Conn, error) {
	if err := check(fd); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "handoff")
	c, err := net.FileConn(f) // a duplicate, non-blocking and in the runtime's poller
	f.Close()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("handed a %T, not a TCP connection", c)
	}
	return handed{tc}, nil
}

// handed is a connection a sandbox handed over. Its socket options are the sandbox's to set
// (it may keep a descriptor of the same socket), and with SO_LINGER on and a full send queue
// close(2) blocks for the linger time: Close turns lingering off and leaves the final close
// to a goroutine nobody waits for, so a sandbox cannot hold up the proxy's shutdown.
type handed struct{ *net.TCPConn }

func (h handed) Close() error {
	h.SetLinger(-1)
	go h.TCPConn.Close()
	return nil
}

// check reports why fd is not a connected TCP stream socket.
func check(fd int) error {
	typ, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE)
	if err != nil {
		return fmt.Errorf("handed a descriptor that is not a socket: %w", err)
	}
	if typ != syscall.SOCK_STREAM {
		return fmt.Errorf("handed a socket of type %d, not a stream", typ)
	}
	if err := checkProtocol(fd); err != nil {
		return err
	}
	if l, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN); err != nil || l != 0 {
		return errors.New("handed a listening socket, not a connection")
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return fmt.Errorf("handed a socket without an address: %w", err)
	}
	switch sa.(type) {
	case *syscall.SockaddrInet4, *syscall.SockaddrInet6:
	default:
		return fmt.Errorf("handed a %T socket, not TCP", sa)
	}
	if _, err := syscall.Getpeername(fd); err != nil {
		return fmt.Errorf("handed a socket that is not connected: %w", err)
	}
	return nil
}
