package owner

import (
	"fmt"
	"os"
	"path"
	"syscall"
	"unsafe"
)

// Supported reports whether session owners run on this system. They do on Linux only: an
// owner checks every caller against the calling process itself through SO_PEERCRED and
// /proc (see VerifyPeer), which macOS and Windows do not have. Elsewhere every exec runs in
// its own process.
const Supported = true

// Sockaddr returns an address for path that fits a sockaddr_un. A path too long for it is
// reached through this process's descriptor of its directory.
func Sockaddr(p string) (string, func(), error) {
	if len(p) < 100 {
		return p, func() {}, nil
	}
	const oPath = 0x200000 // O_PATH, which package syscall does not name
	fd, err := syscall.Open(path.Dir(p), oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, &os.PathError{Op: "open", Path: path.Dir(p), Err: err}
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, path.Base(p)), func() { syscall.Close(fd) }, nil
}

// Dial connects to the unix socket at path.
func Dial(path string) (*os.File, error) {
	addr, done, err := Sockaddr(path)
	if err != nil {
		return nil, err
	}
	defer done()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	for {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: addr})
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		return nil, &os.PathError{Op: "connect", Path: path, Err: err}
	}
	// Non-blocking from here on, so that the runtime's poller serves it (and deadlines work).
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, os.NewSyscallError("setnonblock", err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// IsTerminal reports whether fd is a terminal.
func IsTerminal(fd int) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
