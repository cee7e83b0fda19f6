//go:build unix

package cli

import (
	"net"
	"testing"
)

func TestListenURL(t *testing.T) {
	for _, c := range []struct{ requested, bound, want string }{
		{"0.0.0.0:8765", "[::]:8765", "http://0.0.0.0:8765/mcp (all interfaces; from this machine: http://127.0.0.1:8765/mcp)"},
		{":0", "[::]:40001", "http://0.0.0.0:40001/mcp (all interfaces; from this machine: http://127.0.0.1:40001/mcp)"},
		{"127.0.0.1:0", "127.0.0.1:40002", "http://127.0.0.1:40002/mcp"},
		{"[::1]:9000", "[::1]:9000", "http://[::1]:9000/mcp"},
		{"localhost:0", "127.0.0.1:40003", "http://localhost:40003/mcp"},
	} {
		bound, err := net.ResolveTCPAddr("tcp", c.bound)
		if err != nil {
			t.Fatal(err)
		}
		if got := listenURL(c.requested, bound); got != c.want {
			t.Errorf("listenURL(%q, %s) = %q; want %q", c.requested, c.bound, got, c.want)
		}
	}
}
