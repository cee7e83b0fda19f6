//go:build unix

package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/handoff"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/mux"
)

// Relay listens on addr inside the sandbox and carries each accepted connection to the
// host over the multiplexed stream on in/out (see package egress/mux), where the filtering
// proxy serves it. It greets with its listening address once it listens. A port still held
// by an earlier relay of the same session is retried until it frees. Relay returns when the
// host ends the stream (its process went away): from then on nothing listens, so the
// sandbox has no way out at all.
//
// With upstream (a unix socket path; "" for none), each accepted connection is handed over
// that socket to the same proxy on the host (see package egress/handoff), which then serves
// the connection's own socket: the relay is out of the data path, and that runs at the
// speed of loopback. A connection that cannot be handed over still goes over the stream.
func Relay(addr, upstream string, in io.Reader, out io.Writer) error {
	s := mux.New(in, out, nil)
	ran := make(chan error, 1)
	go func() { ran <- s.Run() }()
	var l net.Listener
	for {
		var err error
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		select {
		case <-s.Done():
			return <-ran
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := s.Hello([]byte(l.Addr().String())); err != nil {
		l.Close()
		return <-ran
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-s.Done()
		l.Close()
	}()
	h := &hander{path: upstream}
	defer h.close()
	var conns sync.WaitGroup
	for {
		c, err := l.Accept()
		if err != nil {
			break
		}
		if h.hand(c) {
			c.Close() // the proxy holds its own descriptor of the socket
			continue
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			relayConn(s, c)
		}()
	}
	wg.Wait()
	conns.Wait()
	err := <-ran
	if err != nil && !errors.Is(err, mux.ErrClosed) {
		return fmt.Errorf("relay: %w", err)
	}
	return nil
}

// hander hands accepted connections to the proxy's unix socket, over one connection it
// dials when first needed and again after a failure.
type hander struct {
	path string
	uc   *net.UnixConn
}

// hand reports whether c went to the proxy.
func (h *hander) hand(c net.Conn) bool {
	tc, ok := c.(*net.TCPConn)
	if h.path == "" || !ok {
		return false
	}
	for try := 0; try < 2; try++ {
		if h.uc == nil {
			u, err := net.Dial("unix", h.path)
			if err != nil {
				return false
			}
			h.uc = u.(*net.UnixConn)
		}
		if err := handoff.Send(h.uc, tc); err == nil {
			return true
		}
		h.close()
	}
	return false
}

func (h *hander) close() {
	if h.uc != nil {
		h.uc.Close()
		h.uc = nil
	}
}

// relayConn copies one local connection to a new stream, and back.
func relayConn(s *mux.Session, c net.Conn) {
	defer c.Close()
	st, err := s.Open()
	if err != nil {
		return
	}
	defer st.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := io.Copy(st, c); err == nil {
			st.CloseWrite()
		} else {
			st.Close()
		}
	}()
	if _, err := io.Copy(c, st); err == nil {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	} else {
		c.Close()
	}
	<-done
}
