package agent

import (
	"time"

	"golang.org/x/sys/unix"
)

// waitExited waits until process pid has exited, without reaping it: macOS has no waitid
// in package unix, so a kqueue watches for the child's NOTE_EXIT, which leaves the zombie
// for the caller's Wait. (Compiled here; run only on a Mac.)
func waitExited(pid int) {
	kq, err := unix.Kqueue()
	if err != nil {
		pollExited(pid)
		return
	}
	defer unix.Close(kq)
	var ev unix.Kevent_t
	unix.SetKevent(&ev, pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev.Fflags = unix.NOTE_EXIT
	out := make([]unix.Kevent_t, 1)
	for {
		_, err := unix.Kevent(kq, []unix.Kevent_t{ev}, out, nil)
		switch err {
		case unix.EINTR:
			continue
		case nil, unix.ESRCH: // exited, or had already exited when the watch was set
			return
		}
		pollExited(pid)
		return
	}
}

// pollExited is waitExited's fallback when no kqueue can watch pid: a zombie's state, read
// with sysctl kern.proc.pid, is SZOMB.
func pollExited(pid int) {
	const szomb = 5 // p_stat of a zombie (sys/proc.h)
	for {
		kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
		if err != nil || kp.Proc.P_stat == szomb {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
