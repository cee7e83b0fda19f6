//go:build linux

package seccomp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"golang.org/x/sys/unix"
)

// childEnv makes the test binary a child that tries one operation (try-unix, try-inet, try-pair, try-x32-unix,
// try-uring) and reports with its exit code whether it was allowed, refused with EPERM, or failed otherwise.
const childEnv = "HERMES_SECCOMP_TEST_CHILD"

// A child's exit codes.
const (
	exitAllowed = 0
	exitEPERM   = 3
	exitOther   = 4
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

func child(mode string) int {
	var fds []int
	var err error
	switch mode {
	case "try-unix":
		var fd int
		fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		fds = append(fds, fd)
	case "try-inet":
		var fd int
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		fds = append(fds, fd)
	case "try-pair":
		var pair [2]int
		pair, err = unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		fds = append(fds, pair[:]...)
	case "try-x32-unix":
		// The x32 ABI's socket(2). Unfiltered, a kernel without x32 support answers ENOSYS.
		fd, _, errno := unix.Syscall(x32Bit|unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		fds, err = append(fds, int(fd)), errnoErr(errno)
	case "try-uring":
		var params [120]byte // struct io_uring_params
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
		fds, err = append(fds, int(fd)), errnoErr(errno)
	default:
		err = fmt.Errorf("unknown %s %q", childEnv, mode)
	}
	switch {
	case err == nil:
		for _, fd := range fds {
			unix.Close(fd)
		}
		return exitAllowed
	case errors.Is(err, unix.EPERM):
		return exitEPERM
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", mode, err)
	return exitOther
}

func errnoErr(errno unix.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}

// thread is an OS thread that one goroutine holds for good.
type thread struct{ work chan func() }

// newThread starts a goroutine locked to its own OS thread and, when f is not nil, sets PR_SET_NO_NEW_PRIVS and
// installs *f there. The goroutine never unlocks the thread, so the thread and its filter end with it, when the
// test ends.
func newThread(t *testing.T, f *Filter) *thread {
	t.Helper()
	th := &thread{work: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var err error
		if f != nil {
			err = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
			if err == nil {
				err = Install(*f)
			}
		}
		ready <- err
		if err != nil {
			return
		}
		for fn := range th.work {
			fn()
		}
	}()
	if err := <-ready; err != nil {
		t.Fatalf("Install(%+v) = %v; want nil", *f, err)
	}
	t.Cleanup(func() { close(th.work) })
	return th
}

// do runs fn on the thread.
func (th *thread) do(fn func()) {
	done := make(chan struct{})
	th.work <- func() { fn(); close(done) }
	<-done
}

// try starts a child from th that tries mode, and returns what happened: "allowed", "EPERM" or an error.
func try(t *testing.T, th *thread, mode string) string {
	t.Helper()
	var stderr bytes.Buffer
	var err error
	th.do(func() {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+mode)
		cmd.Stderr = &stderr
		cmd.WaitDelay = 10 * time.Second
		err = cmd.Run()
	})
	var exit *exec.ExitError
	switch {
	case err == nil:
		return "allowed"
	case errors.As(err, &exit) && exit.ExitCode() == exitEPERM:
		return "EPERM"
	}
	return fmt.Sprintf("error: %v: %s", err, strings.TrimSpace(stderr.String()))
}

// needSeccomp skips the test (fails it with HERMES_SANDBOX_TEST_REQUIRE=seccomp) without seccomp filters.
func needSeccomp(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		testenv.Missing(t, "seccomp", err.Error())
	}
}

// TestUnixSockets: a child of the filtered thread cannot create an AF_UNIX socket, but can create an AF_INET socket
// and a socketpair; a child of another thread, and the test process itself, still can.
func TestUnixSockets(t *testing.T) {
	needSeccomp(t)
	free := newThread(t, nil)
	// First prove that the children can create what the filter must refuse.
	if got := try(t, free, "try-unix"); got != "allowed" {
		t.Fatalf("try-unix from an unfiltered thread = %s; want allowed", got)
	}
	filtered := newThread(t, &Filter{UnixSockets: true})
	tests := []struct{ mode, want string }{
		{"try-unix", "EPERM"},
		{"try-inet", "allowed"},
		{"try-pair", "allowed"},
	}
	for _, tt := range tests {
		if got := try(t, filtered, tt.mode); got != tt.want {
			t.Errorf("%s from the filtered thread = %s; want %s", tt.mode, got, tt.want)
		}
	}
	// The filter is the thread's own: with the filtered thread still alive, the rest of the process is free.
	if got := try(t, free, "try-unix"); got != "allowed" {
		t.Errorf("try-unix from another thread while the filter is installed = %s; want allowed", got)
	}
	if got := try(t, newThread(t, nil), "try-unix"); got != "allowed" {
		t.Errorf("try-unix from a thread started after the filter = %s; want allowed", got)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Errorf("socket(AF_UNIX) in the test process = %v; want a socket", err)
	} else {
		unix.Close(fd)
	}
}

// TestBypasses: the x32 ABI's socket(2) and io_uring_setup(2) are refused too.
func TestBypasses(t *testing.T) {
	needSeccomp(t)
	free := newThread(t, nil)
	filtered := newThread(t, &Filter{UnixSockets: true})
	t.Run("x32", func(t *testing.T) {
		if runtime.GOARCH != "amd64" {
			t.Skipf("skipping: the x32 ABI exists on amd64 only, not %s", runtime.GOARCH)
		}
		// Unfiltered, the call reaches the kernel: a socket, or ENOSYS without x32 support.
		if got := try(t, free, "try-x32-unix"); got == "EPERM" {
			t.Fatalf("try-x32-unix from an unfiltered thread = %s; want a socket or ENOSYS", got)
		}
		if got := try(t, filtered, "try-x32-unix"); got != "EPERM" {
			t.Errorf("try-x32-unix from the filtered thread = %s; want EPERM", got)
		}
	})
	t.Run("io_uring", func(t *testing.T) {
		if got := try(t, free, "try-uring"); got != "allowed" {
			testenv.Missing(t, "io_uring", "io_uring_setup from an unfiltered thread: "+got)
		}
		if got := try(t, filtered, "try-uring"); got != "EPERM" {
			t.Errorf("try-uring from the filtered thread = %s; want EPERM", got)
		}
	})
}

// TestEmptyFilter: Install(Filter{}) installs a filter that refuses nothing.
func TestEmptyFilter(t *testing.T) {
	needSeccomp(t)
	var before, after string
	th := newThread(t, nil)
	th.do(func() {
		before = seccompStatus()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			after = "prctl(PR_SET_NO_NEW_PRIVS): " + err.Error()
			return
		}
		if err := Install(Filter{}); err != nil {
			after = "Install(Filter{}): " + err.Error()
			return
		}
		after = seccompStatus()
	})
	if want := bumpFilters(before); after != want {
		t.Fatalf("/proc/thread-self/status after Install(Filter{}) = %q; want %q (before: %q)", after, want, before)
	}
	if got := try(t, th, "try-unix"); got != "allowed" {
		t.Errorf("try-unix under Filter{} = %s; want allowed", got)
	}
}

// seccompStatus returns the calling thread's "Seccomp:" and "Seccomp_filters:" (Linux 5.9) status lines.
func seccompStatus() string {
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return err.Error()
	}
	var lines []string
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, "Seccomp:") || strings.HasPrefix(l, "Seccomp_filters:") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(lines, "; ")
}

// bumpFilters returns the status seccompStatus should report after one more filter.
func bumpFilters(status string) string {
	lines := strings.Split(status, "; ")
	for i, l := range lines {
		if n, ok := strings.CutPrefix(l, "Seccomp_filters: "); ok {
			k, _ := strconv.Atoi(n)
			lines[i] = "Seccomp_filters: " + strconv.Itoa(k+1)
		} else if strings.HasPrefix(l, "Seccomp: ") {
			lines[i] = "Seccomp: 2" // SECCOMP_MODE_FILTER
		}
	}
	return strings.Join(lines, "; ")
}

// TestShellPython: a shell started from the filtered thread runs a python3 that cannot create an AF_UNIX socket.
func TestShellPython(t *testing.T) {
	needSeccomp(t)
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Missing(t, "python3", err.Error())
	}
	const script = `import errno, socket, sys
try:
    socket.socket(socket.AF_UNIX).close()
except OSError as e:
    print(e, file=sys.stderr)
    sys.exit(3 if e.errno == errno.EPERM else 4)`
	shell := func(th *thread) (int, string) {
		var out bytes.Buffer
		var err error
		th.do(func() {
			cmd := exec.CommandContext(t.Context(), "sh", "-c", `python3 -c "$1"; exit $?`, "sh", script)
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.WaitDelay = 10 * time.Second
			err = cmd.Run()
		})
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), out.String()
		} else if err != nil {
			return -1, err.Error()
		}
		return 0, out.String()
	}
	if code, out := shell(newThread(t, nil)); code != 0 {
		testenv.Missing(t, "python3", fmt.Sprintf("unconfined python3 cannot create an AF_UNIX socket: exit %d: %s",
			code, out))
	}
	if code, out := shell(newThread(t, &Filter{UnixSockets: true})); code != 3 {
		t.Errorf("python3 socket(AF_UNIX) from the filtered thread: exit %d (%s); want 3 (EPERM)", code, out)
	}
}

// TestInstallNeedsNoNewPrivs: without PR_SET_NO_NEW_PRIVS or CAP_SYS_ADMIN, Install says what is missing.
func TestInstallNeedsNoNewPrivs(t *testing.T) {
	needSeccomp(t)
	if os.Geteuid() == 0 {
		t.Skip("skipping: root may install filters without PR_SET_NO_NEW_PRIVS")
	}
	var err error
	newThread(t, nil).do(func() { err = Install(Filter{UnixSockets: true}) })
	if !errors.Is(err, unix.EACCES) || !strings.Contains(err.Error(), "PR_SET_NO_NEW_PRIVS") {
		t.Errorf("Install without PR_SET_NO_NEW_PRIVS = %v; want EACCES naming PR_SET_NO_NEW_PRIVS", err)
	}
}

// TestProgram runs the program of every supported architecture, in an interpreter, on calls that cannot all be made
// from this host: the compat ABIs (i386, arm32), x32, and the other architecture.
func TestProgram(t *testing.T) {
	const (
		x64     = unix.AUDIT_ARCH_X86_64
		i386    = unix.AUDIT_ARCH_I386
		aarch64 = unix.AUDIT_ARCH_AARCH64
		arm     = unix.AUDIT_ARCH_ARM
		afUnix  = unix.AF_UNIX
		afInet  = unix.AF_INET
		allow   = unix.SECCOMP_RET_ALLOW
		deny    = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	type call struct {
		arch uint32
		nr   uint32
		args [2]uint64
	}
	tests := []struct {
		goarch string
		call   call
		want   uint32
	}{
		{"amd64", call{x64, 41, [2]uint64{afUnix, unix.SOCK_STREAM}}, deny},
		{"amd64", call{x64, 41, [2]uint64{0xffffffff_00000000 | afUnix}}, deny}, // socket takes an int
		{"amd64", call{x64, 41, [2]uint64{afInet}}, allow},
		{"amd64", call{x64, 53, [2]uint64{afUnix}}, allow}, // socketpair
		{"amd64", call{x64, 1, [2]uint64{afUnix}}, allow},  // write(1, …)
		{"amd64", call{x64, 425, [2]uint64{}}, deny},       // io_uring_setup
		{"amd64", call{x64, x32Bit | 41, [2]uint64{afUnix}}, deny},
		{"amd64", call{x64, x32Bit | 41, [2]uint64{afInet}}, allow},
		{"amd64", call{x64, x32Bit | 425, [2]uint64{}}, deny},
		{"amd64", call{i386, 102, [2]uint64{1, 0xffd0_0000}}, deny},  // socketcall(SYS_SOCKET, args)
		{"amd64", call{i386, 102, [2]uint64{3, 0xffd0_0000}}, allow}, // socketcall(SYS_CONNECT, args)
		{"amd64", call{i386, 359, [2]uint64{afUnix}}, deny},
		{"amd64", call{i386, 359, [2]uint64{afInet}}, allow},
		{"amd64", call{i386, 360, [2]uint64{afUnix}}, allow}, // socketpair
		{"amd64", call{i386, 41, [2]uint64{afUnix}}, allow},  // dup(1), not socket
		{"amd64", call{i386, 425, [2]uint64{}}, deny},
		{"amd64", call{aarch64, 198, [2]uint64{afUnix}}, allow}, // not an ABI of this host
		{"amd64", call{0, 41, [2]uint64{afUnix}}, allow},
		{"arm64", call{aarch64, 198, [2]uint64{afUnix}}, deny},
		{"arm64", call{aarch64, 198, [2]uint64{afInet}}, allow},
		{"arm64", call{aarch64, 199, [2]uint64{afUnix}}, allow}, // socketpair
		{"arm64", call{aarch64, 41, [2]uint64{afUnix}}, allow},
		{"arm64", call{aarch64, 425, [2]uint64{}}, deny},
		{"arm64", call{arm, 281, [2]uint64{afUnix}}, deny},
		{"arm64", call{arm, 281, [2]uint64{afInet}}, allow},
		{"arm64", call{arm, 425, [2]uint64{}}, deny},
		{"arm64", call{x64, 41, [2]uint64{afUnix}}, allow},
	}
	for _, tt := range tests {
		abis, err := abisFor(tt.goarch)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []Filter{{UnixSockets: true}, {}} {
			want := tt.want
			if !f.UnixSockets {
				want = allow
			}
			c := tt.call
			if got := run(t, program(f, abis), c.arch, c.nr, c.args); got != want {
				t.Errorf("%s program(%+v) on arch %#x nr %#x args %#x = %#x; want %#x",
					tt.goarch, f, c.arch, c.nr, c.args, got, want)
			}
		}
	}
}

// TestNumbers: the native ABI's numbers are this host's.
func TestNumbers(t *testing.T) {
	abis, err := abisFor(runtime.GOARCH)
	if err != nil {
		t.Skip("skipping:", err)
	}
	if got := abis[0]; got.socket != unix.SYS_SOCKET || got.ioUringSetup != unix.SYS_IO_URING_SETUP {
		t.Errorf("abisFor(%q)[0] = %+v; want socket %d, io_uring_setup %d", runtime.GOARCH, got, unix.SYS_SOCKET,
			unix.SYS_IO_URING_SETUP)
	}
}

// run interprets p the way the kernel does for a call on a little-endian machine (amd64, arm64), and returns the
// action.
func run(t *testing.T, p []unix.SockFilter, arch, nr uint32, args [2]uint64) uint32 {
	t.Helper()
	// struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[0:], nr)
	binary.LittleEndian.PutUint32(data[4:], arch)
	binary.LittleEndian.PutUint64(data[16:], args[0])
	binary.LittleEndian.PutUint64(data[24:], args[1])
	if len(p) == 0 || len(p) > unix.BPF_MAXINSNS {
		t.Fatalf("program has %d instructions", len(p))
	}
	var a uint32
	for pc := 0; pc < len(p); pc++ {
		in := p[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if in.K%4 != 0 || int(in.K)+4 > len(data) {
				t.Fatalf("instruction %d loads at %d", pc, in.K)
			}
			a = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			a &= in.K
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if a == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
			if pc+1 >= len(p) {
				t.Fatalf("instruction %d jumps past the end", pc)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %d: unknown opcode %#x", pc, in.Code)
		}
	}
	t.Fatalf("program ends without a return")
	return 0
}
