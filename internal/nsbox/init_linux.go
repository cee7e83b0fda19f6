//go:build linux

package nsbox

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/nsbox/nsinit"
)

// The re-executed binary becomes the helper inside a session's namespaces (started by the
// init, package nsinit) before main runs, in every binary that links this package: the CLI,
// a library user's program, a test binary.
func init() {
	if os.Getenv(nsinit.EnvRole) == nsinit.RoleServer {
		os.Exit(runServer())
	}
}

// server accepts the clients of one session's namespaces.
type server struct {
	spec   Spec
	report []byte
	l      *net.UnixListener

	mu      sync.Mutex
	clients int       // guarded by mu
	seen    time.Time // guarded by mu; when the last client left, or the server started
}

// runServer serves clients until none is left and no process runs inside besides the init
// and itself.
func runServer() int {
	os.Unsetenv(nsinit.EnvRole)
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	var ss nsinit.ServerSpec
	var spec Spec
	f := os.NewFile(4, "spec")
	err := json.NewDecoder(f).Decode(&ss)
	if err == nil {
		err = json.Unmarshal(ss.Spec, &spec)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hermes-sandbox helper: read the spec:", err)
		return 1
	}
	f.Close()
	fl, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hermes-sandbox helper:", err)
		return 1
	}
	rep, _ := json.Marshal(ss.Report)
	s := &server{spec: spec, report: rep, l: fl.(*net.UnixListener), seen: time.Now()}
	go s.idle()
	for {
		c, err := s.l.AcceptUnix()
		if err != nil {
			return 0 // closed by idle
		}
		s.mu.Lock()
		s.clients++
		s.mu.Unlock()
		go func() {
			s.handle(c)
			c.Close()
			s.mu.Lock()
			s.clients--
			s.seen = time.Now()
			s.mu.Unlock()
		}()
	}
}

// idleGrace is how long the server waits, with no client and nothing running inside, before
// it ends the namespaces (a client that just started them connects well within it).
const idleGrace = 2 * time.Second

// idle ends the server once it has had no client for idleGrace and no other process runs in
// its namespaces (background jobs keep them).
func (s *server) idle() {
	for range time.Tick(250 * time.Millisecond) {
		s.mu.Lock()
		quiet := s.clients == 0 && time.Since(s.seen) >= idleGrace
		if quiet && othersInside() == 0 {
			s.l.Close() // no client arrives after this; one mid-connect gets EOF and retries
			s.mu.Unlock()
			os.Exit(0)
		}
		s.mu.Unlock()
	}
}

// othersInside counts the processes of the PID namespace other than the init and this one.
func othersInside() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 1
	}
	self := os.Getpid()
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 || pid == self {
			continue
		}
		n++
	}
	return n
}

// handle serves one connection: its first line says what for.
func (s *server) handle(c *net.UnixConn) {
	if !samePeer(c) {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(startTimeout))
	line, err := readLine(c, 1<<20)
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	var req request
	if err := json.Unmarshal([]byte(line), &req); err != nil {
		fmt.Fprintf(c, "error bad request: %s\n", nsinit.OneLine(err.Error()))
		return
	}
	switch req.Op {
	case opServe:
		h := Helper{}
		if req.Helper != nil {
			h = *req.Helper
		}
		srv, err := agent.NewServer(agent.Options{StateDir: s.spec.StateDir, Shell: h.Shell, Env: h.Env, Cwd: h.Cwd, Confine: s.spec.Confine})
		if err != nil {
			fmt.Fprintf(c, "error %s\n", nsinit.OneLine(err.Error()))
			return
		}
		fmt.Fprintf(c, "ok %s\n", s.report)
		_ = srv.Serve(c, c)
	case opRelay:
		if s.spec.Network != NetworkAllowlist {
			fmt.Fprintf(c, "error the session's network is %s: no relay\n", s.spec.Network)
			return
		}
		fmt.Fprintln(c, "ok")
		if err := agent.Relay(egress.RelayAddr, "", c, c); err != nil {
			fmt.Fprintln(os.Stderr, "hermes-sandbox helper: relay:", err)
		}
	case opStop:
		// Every process inside but the init and this one; the init ends with this one.
		_ = syscall.Kill(-1, syscall.SIGKILL)
		fmt.Fprintln(c, "ok")
		os.Exit(0)
	default:
		fmt.Fprintf(c, "error unknown request %q\n", req.Op)
	}
}

// samePeer reports whether the connecting process is this user's (only it can reach the
// socket's directory, but a socket answers whoever has a descriptor of it).
func samePeer(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = raw.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		ok = err == nil && int(cred.Uid) == os.Getuid()
	})
	return ok
}
