//go:build linux

package agent

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/pathtree"
	"github.com/hermes-sandbox/hermes-sandbox/internal/seccomp"
)

// LandlockABI returns the kernel's Landlock ABI version, or an error saying why it has none.
func LandlockABI() (int, error) {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0, fmt.Errorf("this kernel has no Landlock (older than 5.13, or not enabled at boot: add landlock to the lsm= kernel parameter): %w", err)
	}
	if v < 1 {
		return 0, errors.New("this kernel has no Landlock")
	}
	return v, nil
}

// writeRights are the access rights a confined command loses outside its grants.
const writeRights = ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar |
	ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock |
	ll.AccessFSMakeSym | ll.AccessFSRefer | ll.AccessFSTruncate

// fileRights are the write rights that apply to a file itself.
const fileRights = ll.AccessFSWriteFile | ll.AccessFSTruncate

// confiner starts processes from one OS thread that carries a Landlock domain: a child
// inherits the domain of the thread that forks it, and the helper itself stays free to write
// its own state.
type confiner struct {
	work   chan func()
	status ConfinementStatus
}

// newConfiner builds the ruleset and the thread that enforces it. scratch are the session's
// own directories that commands must be able to write (their exit state, job output).
func newConfiner(c Confinement, scratch []string) (*confiner, error) {
	abi, err := LandlockABI()
	if err != nil {
		return nil, err
	}
	handled := landlock.AccessFSSet(writeRights)
	if abi < 3 {
		handled &^= ll.AccessFSTruncate
	}
	if abi < 2 {
		handled &^= ll.AccessFSRefer
	}
	protect := pathtree.Clean(c.Protect)
	roots := []string{"/"}
	if c.Strict {
		roots = append(pathtree.Clean(c.Writable), "/dev")
	}
	var rules []landlock.Rule
	for _, g := range writeGrants(roots, protect) {
		rights := handled
		if !g.dir {
			rights &= fileRights
		}
		rules = append(rules, landlock.PathAccess(rights, g.path).IgnoreIfMissing())
	}
	// The session's scratch directories are writable even inside the protected state.
	rules = append(rules, landlock.PathAccess(handled, pathtree.Clean(scratch)...))
	fd, flags, err := landlock.Config{HandledAccessFS: handled}.NewRulesetFD(rules...)
	if err != nil {
		return nil, fmt.Errorf("build the Landlock ruleset: %w", err)
	}
	if fd < 0 {
		return nil, errors.New("this kernel's Landlock has nothing to enforce")
	}
	cf := &confiner{work: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		// The thread is never unlocked: when the goroutine ends, the runtime ends the thread
		// and its domain with it. The runtime starts new threads from its template thread,
		// never from a locked one, so the domain cannot leak into the helper's other threads.
		runtime.LockOSThread()
		var err error
		if c.DropCaps {
			err = dropBoundingCaps()
		}
		if err == nil {
			err = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
		}
		if err == nil && c.NoUnixSockets {
			err = seccomp.Install(seccomp.Filter{UnixSockets: true})
		}
		if err == nil {
			err = ll.LandlockRestrictSelf(fd, flags)
		}
		syscall.Close(fd)
		ready <- err
		if err != nil {
			return
		}
		for fn := range cf.work {
			fn()
		}
	}()
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("enforce the Landlock ruleset: %w", err)
	}
	mode := "the tool's config and state are read-only"
	if c.Strict {
		mode = "writes only under the workspace and temporary directories"
	}
	if c.NoUnixSockets {
		mode += "; no unix sockets (seccomp)"
	}
	cf.status = ConfinementStatus{Enforced: true, Detail: fmt.Sprintf("Landlock ABI %d: %s", abi, mode)}
	return cf, nil
}

// keptCaps are what a root command keeps with DropCaps: docker's default set less CAP_MKNOD
// (a disk's device node) and CAP_NET_RAW.
var keptCaps = map[uintptr]bool{unix.CAP_CHOWN: true, unix.CAP_DAC_OVERRIDE: true, unix.CAP_FSETID: true,
	unix.CAP_FOWNER: true, unix.CAP_SETGID: true, unix.CAP_SETUID: true, unix.CAP_SETFCAP: true,
	unix.CAP_SETPCAP: true, unix.CAP_NET_BIND_SERVICE: true, unix.CAP_SYS_CHROOT: true, unix.CAP_KILL: true,
	unix.CAP_AUDIT_WRITE: true}

// dropBoundingCaps takes every capability but keptCaps out of the calling thread's bounding
// set, so a root command started from it gets no other at exec. Without CAP_SETPCAP (a user
// other than root, whose commands get no capability at exec anyway) there is nothing to do.
func dropBoundingCaps() error {
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		if keptCaps[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
			if err == unix.EPERM && os.Getuid() != 0 {
				return nil
			}
			if err == unix.EINVAL {
				return nil // past the kernel's last capability
			}
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}

// start runs fn (which starts a process) on the confined thread.
func (cf *confiner) start(fn func()) {
	done := make(chan struct{})
	cf.work <- func() { fn(); close(done) }
	<-done
}

func (cf *confiner) close() { close(cf.work) }
