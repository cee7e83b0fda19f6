//go:build linux

package handoff

import (
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pair returns the two ends of a unix stream socket pair as connections.
func pair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// receiveAll runs Receive on uc until the sender closes it and returns what it served and
// rejected.
func receiveAll(t *testing.T, uc *net.UnixConn) (<-chan net.Conn, <-chan error, <-chan error) {
	served := make(chan net.Conn, 8)
	rejected := make(chan error, 8)
	done := make(chan error, 1)
	go func() {
		done <- Receive(uc, func(c net.Conn) { served <- c }, func(err error) { rejected <- err })
		close(served)
		close(rejected)
	}()
	return served, rejected, done
}

// TestHandOverATCPConnection: the proxy side reads and writes the very socket the relay
// accepted, and the relay's own descriptor can be closed at once.
func TestHandOverATCPConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	accepted, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	relay, proxy := pair(t)
	served, rejected, done := receiveAll(t, proxy)
	if err := Send(relay, accepted.(*net.TCPConn)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	accepted.Close() // the relay's copy
	var c net.Conn
	select {
	case c = <-served:
	case err := <-rejected:
		t.Fatalf("the TCP connection was rejected: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was handed over")
	}
	defer c.Close()
	if _, err := io.WriteString(client, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("the proxy side read %q, %v; want ping", buf, err)
	}
	io.WriteString(c, "pong")
	c.(interface{ CloseWrite() error }).CloseWrite()
	client.SetDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(client); err != nil || string(got) != "pong" {
		t.Fatalf("the client read %q, %v; want pong then EOF", got, err)
	}
	relay.Close()
	if err := <-done; err != nil {
		t.Errorf("Receive after the sender closed = %v; want nil", err)
	}
}

// TestOnlyConnectedTCPSocketsAreTaken: the sandbox chooses what it sends, so a file, a
// pipe, a listening socket, a unix socket and a UDP socket are all closed unused.
func TestOnlyConnectedTCPSocketsAreTaken(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "file")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	u1, _ := pair(t)
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	unconnected, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(unconnected)
	fdOf := func(c syscall.Conn) int {
		raw, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var out int
		raw.Control(func(fd uintptr) { out = int(fd) })
		return out
	}
	bad := map[string]int{
		"file":             int(f.Fd()),
		"pipe":             int(pr.Fd()),
		"listening socket": fdOf(tl.(*net.TCPListener)),
		"unix socket":      fdOf(u1),
		"udp socket":       fdOf(udp.(*net.UDPConn)),
		"unconnected tcp":  unconnected,
	}
	relay, proxy := pair(t)
	served, rejected, done := receiveAll(t, proxy)
	for name, fd := range bad {
		if _, _, err := relay.WriteMsgUnix([]byte{1}, syscall.UnixRights(fd), nil); err != nil {
			t.Fatalf("send %s: %v", name, err)
		}
		select {
		case err := <-rejected:
			t.Logf("%s: %v", name, err)
		case c := <-served:
			c.Close()
			t.Errorf("a %s was taken as a connection", name)
		case <-time.After(10 * time.Second):
			t.Fatalf("a %s was neither taken nor rejected", name)
		}
	}
	// Bytes without a descriptor are ignored, and several descriptors in one message are
	// each judged.
	if _, err := relay.Write([]byte("junk")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := relay.WriteMsgUnix([]byte{1}, syscall.UnixRights(int(f.Fd()), int(pr.Fd())), nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-rejected:
			if !strings.Contains(err.Error(), "not a socket") {
				t.Errorf("rejection %d = %v; want not a socket", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("two descriptors in one message were not both rejected")
		}
	}
	relay.Close()
	if err := <-done; err != nil {
		t.Errorf("Receive = %v", err)
	}
	if c, ok := <-served; ok {
		t.Errorf("served %v; want nothing", c.RemoteAddr())
	}
}

// TestLingerCannotHoldClose: a sandbox can set SO_LINGER on the socket it hands over and
// fill its send queue, which makes close(2) block for the linger time; the proxy's Close
// still returns at once.
func TestLingerCannotHoldClose(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	client.(*net.TCPConn).SetReadBuffer(4 << 10) // and never read
	acc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b := acc.(*net.TCPConn)
	b.SetLinger(30)
	b.SetWriteBuffer(4 << 10)
	b.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
	chunk := make([]byte, 64<<10)
	for {
		if _, err := b.Write(chunk); err != nil {
			break // the send queue is full
		}
	}
	relay, proxy := pair(t)
	served, _, _ := receiveAll(t, proxy)
	if err := Send(relay, b); err != nil {
		t.Fatal(err)
	}
	b.Close() // not the last descriptor: does not linger
	var c net.Conn
	select {
	case c = <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was handed over")
	}
	start := time.Now()
	c.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("closing a handed-over lingering socket took %s; want it at once", d)
	}
}
