//go:build linux

// Package seccomp installs a small seccomp-BPF filter on one OS thread, so that the commands
// started from that thread (and everything they start) cannot make the refused system calls.
package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Filter says what the filter refuses.
type Filter struct {
	// UnixSockets refuses socket(AF_UNIX, …) with EPERM: a confined command cannot connect to a path socket of the
	// host (docker.sock, tmux, ssh-agent, the D-Bus session bus). socketpair(2) stays allowed.
	UnixSockets bool
}

// Install installs f on the calling thread; children forked from it inherit it. Returns an error saying why when
// the kernel has no seccomp filters.
//
// The caller must have locked its goroutine to the thread (runtime.LockOSThread) and must never unlock it: the
// filter cannot be removed, so the thread has to end with the goroutine. Unless the caller has CAP_SYS_ADMIN, the
// thread needs PR_SET_NO_NEW_PRIVS first. The filter applies to this thread only (no SECCOMP_FILTER_FLAG_TSYNC).
func Install(f Filter) error {
	abis, err := abisFor(runtime.GOARCH)
	if err != nil {
		return err
	}
	prog := program(f, abis)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// prctl(PR_SET_SECCOMP) rather than seccomp(2): it works from Linux 3.5, and without flags the two are the same.
	_, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER,
		uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch errno {
	case 0:
		return nil
	case unix.EACCES:
		return fmt.Errorf("install the seccomp filter: the thread needs PR_SET_NO_NEW_PRIVS (or CAP_SYS_ADMIN): %w",
			errno)
	}
	return fmt.Errorf("install the seccomp filter: %w", explain(errno))
}

// Available reports whether seccomp filters work here (nil) or why not.
func Available() error {
	if _, err := abisFor(runtime.GOARCH); err != nil {
		return err
	}
	// A null program is refused with EFAULT by a kernel that has seccomp filters, and with EINVAL by one that has
	// not (the probe libseccomp and runc use). It installs nothing.
	_, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, 0)
	if errno == unix.EFAULT {
		return nil
	}
	return explain(errno)
}

// explain turns the errno of prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER) into a sentence.
func explain(errno unix.Errno) error {
	if errno == unix.EINVAL {
		return fmt.Errorf("seccomp filters are not available: the kernel was built without CONFIG_SECCOMP_FILTER "+
			"(%w): %w", errno, errors.ErrUnsupported)
	}
	return fmt.Errorf("seccomp filters are not available: %w", errno)
}

// abi is one system-call convention the filter recognises, by the arch value the kernel reports in seccomp_data.
type abi struct {
	arch uint32
	// x32 is set on x86_64, whose x32 system calls are the same numbers with __X32_SYSCALL_BIT set.
	x32 bool
	// socket, socketcall (0: none) and ioUringSetup are this ABI's system-call numbers.
	socket, socketcall, ioUringSetup uint32
}

// x32Bit marks an x32 system call on x86_64 (__X32_SYSCALL_BIT).
const x32Bit = 0x40000000

// abisFor returns the native ABI of goarch, then its 32-bit compat ABI. A command can switch to the compat ABI
// (int $0x80 on x86_64, an arm32 binary on arm64), so the filter must cover it too.
func abisFor(goarch string) ([]abi, error) {
	switch goarch {
	case "amd64":
		return []abi{
			{arch: unix.AUDIT_ARCH_X86_64, x32: true, socket: 41, ioUringSetup: 425},
			{arch: unix.AUDIT_ARCH_I386, socket: 359, socketcall: 102, ioUringSetup: 425},
		}, nil
	case "arm64":
		return []abi{
			{arch: unix.AUDIT_ARCH_AARCH64, socket: 198, ioUringSetup: 425},
			// arm64 runs only EABI arm32 binaries, which have no socketcall.
			{arch: unix.AUDIT_ARCH_ARM, socket: 281, ioUringSetup: 425},
		}, nil
	}
	return nil, fmt.Errorf("seccomp filters are not available: no system-call table for %s: %w", goarch,
		errors.ErrUnsupported)
}

// Offsets in struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]. Both amd64 and
// arm64 are little-endian, so an argument's low 32 bits come first.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
)

const (
	sysSocket = 1 // socketcall(2)'s first argument for socket(2)

	// toAllow and toDeny stand for the last two instructions in a jump until program resolves them.
	toAllow = 0xff
	toDeny  = 0xfe
)

func load(off uint32) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
}

func jeq(k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: jt, Jf: jf, K: k}
}

func ret(k uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k} }

// program returns the BPF program for f: for each ABI a block that runs only when the arch matches, then the two
// returns every block jumps to. A call from any other ABI is allowed.
func program(f Filter, abis []abi) []unix.SockFilter {
	if !f.UnixSockets {
		return []unix.SockFilter{ret(unix.SECCOMP_RET_ALLOW)}
	}
	p := []unix.SockFilter{load(offArch)}
	for _, a := range abis {
		var b []unix.SockFilter
		b = append(b, load(offNr))
		if a.x32 {
			b = append(b, unix.SockFilter{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: ^uint32(x32Bit)})
		}
		// io_uring's IORING_OP_SOCKET creates sockets without socket(2).
		b = append(b, jeq(a.ioUringSetup, toDeny, 0))
		if a.socketcall != 0 {
			// socketcall(SYS_SOCKET, args): the socket's family is behind a pointer that BPF cannot follow, so
			// refuse every socket created this way.
			b = append(b,
				jeq(a.socketcall, 0, 2),
				load(offArg0),
				jeq(sysSocket, toDeny, toAllow))
		}
		b = append(b,
			jeq(a.socket, 0, toAllow),
			load(offArg0), // the family, an int
			jeq(unix.AF_UNIX, toDeny, toAllow))
		// Not this ABI: skip the block; the accumulator still holds the arch.
		p = append(p, jeq(a.arch, 0, uint8(len(b))))
		p = append(p, b...)
	}
	p = append(p,
		ret(unix.SECCOMP_RET_ALLOW),
		ret(unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)))
	allow, deny := len(p)-2, len(p)-1
	for i := range p {
		if p[i].Code != unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K {
			continue
		}
		for _, j := range []*uint8{&p[i].Jt, &p[i].Jf} {
			switch *j {
			case toAllow:
				*j = uint8(allow - i - 1)
			case toDeny:
				*j = uint8(deny - i - 1)
			}
		}
	}
	return p
}
