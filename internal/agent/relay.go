package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/mux"
)

// Relay listens on addr inside the sandbox and carries each accepted connection to the
// host over the multiplexed stream on in/out (see package egress/mux), where the filtering
// proxy serves it. It greets with its listening address once it listens. A port still held
// by an earlier relay of the same session is retried until it frees. Relay returns when the
// host ends the stream (its process went away): from then on nothing listens, so the
// sandbox has no way out at all.
//
// With upstream (a unix socket path; "" for none), each connection goes to that socket
// instead, where the same proxy listens on the host: a local socket is much faster than the
// stream. A connection the socket refuses still goes over the stream.
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
	var conns sync.WaitGroup
	for {
		c, err := l.Accept()
		if err != nil {
			break
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			relayConn(s, upstream, c)
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

// relayConn copies one local connection to the upstream socket, or to a new stream, and
// back.
func relayConn(s *mux.Session, upstream string, c net.Conn) {
	defer c.Close()
	var st halfCloser
	if upstream != "" {
		if u, err := net.Dial("unix", upstream); err == nil {
			st = u.(*net.UnixConn)
		}
	}
	if st == nil {
		ms, err := s.Open()
		if err != nil {
			return
		}
		st = ms
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

// halfCloser is a connection whose sending half can be closed alone.
type halfCloser interface {
	io.ReadWriteCloser
	CloseWrite() error
}
