//go:build linux

package agent

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// LandlockABI returns the kernel's Landlock ABI version, or an error saying why it has none.
func LandlockABI() (int, error) {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0, fmt.Errorf("Landlock is not available (kernel older than 5.13, or not enabled at boot: add landlock to the lsm= kernel parameter): %w", err)
	}
	if v < 1 {
		return 0, errors.New("Landlock is not available on this kernel")
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
	protect := cleanPaths(c.Protect)
	roots := []string{"/"}
	if c.Strict {
		roots = append(cleanPaths(c.Writable), "/dev")
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
	rules = append(rules, landlock.PathAccess(handled, cleanPaths(scratch)...))
	fd, flags, err := landlock.Config{HandledAccessFS: handled}.NewRulesetFD(rules...)
	if err != nil {
		return nil, fmt.Errorf("build the Landlock ruleset: %w", err)
	}
	if fd < 0 {
		return nil, errors.New("Landlock has nothing to enforce on this kernel")
	}
	cf := &confiner{work: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		// The thread is never unlocked: when the goroutine ends, the runtime ends the thread
		// and its domain with it. The runtime starts new threads from its template thread,
		// never from a locked one, so the domain cannot leak into the helper's other threads.
		runtime.LockOSThread()
		err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
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
	cf.status = ConfinementStatus{Enforced: true, Detail: fmt.Sprintf("Landlock ABI %d: %s", abi, mode)}
	return cf, nil
}

// start runs fn (which starts a process) on the confined thread.
func (cf *confiner) start(fn func()) {
	done := make(chan struct{})
	cf.work <- func() { fn(); close(done) }
	<-done
}

func (cf *confiner) close() { close(cf.work) }
