//go:build linux

package nsbox

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
)

// envRole tells this binary, re-executed, which part it plays; set only by startInit and the
// init itself.
const envRole = "HERMES_SANDBOX_NSBOX"

const (
	roleInit   = "init"
	roleServer = "server"
	roleProbe  = "probe"
)

// The re-executed binary becomes the init or the server before anything else of it runs
// (package initialisation runs before main, in every binary that links this package: the
// CLI, a library user's program, a test binary).
func init() {
	switch os.Getenv(envRole) {
	case roleInit:
		os.Exit(runInit())
	case roleServer:
		os.Exit(runServer())
	case roleProbe:
		os.Exit(runProbe())
	}
}

// runProbe does in new namespaces what an init does first (see Probe).
func runProbe() int {
	err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
	if err == nil {
		err = unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4k")
	}
	if err == nil {
		err = unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mount in the new namespaces:", err)
		return 1
	}
	return 0
}

// runInit is PID 1 of the session's namespaces: it sets up the mounts and the network,
// starts the server, reaps orphans, and exits (taking every process inside with it) when the
// server does.
func runInit() int {
	os.Unsetenv(envRole)
	lf := os.NewFile(3, "listener")
	specR := os.NewFile(4, "spec")
	status := os.NewFile(5, "status")
	fail := func(err error) int {
		fmt.Fprintf(status, "error %s\n", oneLine(err.Error()))
		fmt.Fprintln(os.Stderr, "hermes-sandbox init:", err)
		return 1
	}
	var spec Spec
	if err := json.NewDecoder(specR).Decode(&spec); err != nil {
		return fail(fmt.Errorf("read the spec: %w", err))
	}
	specR.Close()
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	rep, err := setup(spec)
	if err != nil {
		return fail(err)
	}
	// The helper gets no capability: the ambient ones the init was given (without root) are
	// dropped from this thread, the one package initialisation runs on and the helper is
	// forked from.
	if err := dropInheritable(); err != nil {
		return fail(fmt.Errorf("drop ambient capabilities: %w", err))
	}
	// The server gets the spec and the report on a pipe, and the listener.
	pr, pw, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"hermes-sandbox-helper", spec.Session}
	cmd.Env = []string{envRole + "=" + roleServer, "PATH=" + os.Getenv("PATH")}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{lf, pr}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("start the helper: %w", err))
	}
	pr.Close()
	lf.Close()
	_ = json.NewEncoder(pw).Encode(serverSpec{Spec: spec, Report: rep})
	pw.Close()
	fmt.Fprintln(status, "ok")
	status.Close()
	server := cmd.Process.Pid
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid == server {
			return 0
		}
	}
}

// dropInheritable clears the calling thread's ambient and inheritable capabilities (the
// latter would pass on to a program with inheritable file capabilities).
func dropInheritable() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	return unix.Capset(&hdr, &data[0])
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}

// serverSpec is what the init hands its server.
type serverSpec struct {
	Spec   Spec   `json:"spec"`
	Report Report `json:"report"`
}

// server accepts the clients of one session's namespaces.
type server struct {
	spec   Spec
	report []byte
	l      *net.UnixListener

	mu      sync.Mutex
	clients int
	seen    time.Time // when the last client left, or the server started
}

// runServer serves clients until none is left and no process runs inside besides the init
// and itself.
func runServer() int {
	os.Unsetenv(envRole)
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	var ss serverSpec
	f := os.NewFile(4, "spec")
	if err := json.NewDecoder(f).Decode(&ss); err != nil {
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
	s := &server{spec: ss.Spec, report: rep, l: fl.(*net.UnixListener), seen: time.Now()}
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
		fmt.Fprintf(c, "error bad request: %s\n", oneLine(err.Error()))
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
			fmt.Fprintf(c, "error %s\n", oneLine(err.Error()))
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
