//go:build unix

package daemon

import (
	"errors"
	"fmt"
	"github.com/hermes-sandbox/hermes-sandbox/internal/owner"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// maxLog bounds an owner's log: a new owner starts it again beyond this size.
const maxLog = 1 << 20

// readyFD is the descriptor on which a starting owner says it listens (or why it cannot).
const readyFD = 3

// Start makes sure an owner answers at sock, starting one if none does: exe with args, in
// this process's directory, with environ, detached into a session of its own, its output
// appended to logPath. Concurrent starts for one socket wait on a lock beside it, so one
// owner starts and the others find it.
func Start(sock, exe string, args, environ []string, logPath string, timeout time.Duration) error {
	if err := owner.PrivateDir(dirOf(sock)); err != nil {
		return err
	}
	lock, err := os.OpenFile(sock+".lock", os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	for {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "flock", Path: sock + ".lock", Err: err}
	}
	if c, err := owner.Dial(sock); err == nil {
		c.Close()
		return nil
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > maxLog {
		flags |= os.O_TRUNC // the log of earlier owners for this key goes
	}
	logf, err := os.OpenFile(logPath, flags, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe, args...)
	cmd.Env = environ
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w} // readyFD
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("owner: start %s: %w", exe, err)
	}
	_ = r.SetReadDeadline(time.Now().Add(timeout))
	msg, err := io.ReadAll(r)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("owner: wait for the owner to start: %w", err)
	}
	if string(msg) != "ok" {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("owner: the owner did not start within %s (its log: %s)", timeout, logPath)
		}
		if len(msg) == 0 {
			return fmt.Errorf("owner: the owner exited while starting (its log: %s)", logPath)
		}
		return fmt.Errorf("owner: %s", strings.TrimSpace(string(msg)))
	}
	// The owner lives on in its own session; nothing here waits for it.
	return cmd.Process.Release()
}

// Ready tells the process that started this owner that it listens (err == nil) or why it
// cannot. It does nothing in a process that was not started by Start.
func Ready(err error) {
	// Look before wrapping: an *os.File closes its descriptor when collected, and in a process
	// that Start did not start, descriptor 3 is somebody else's.
	var st syscall.Stat_t
	if syscall.Fstat(readyFD, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return
	}
	f := os.NewFile(readyFD, "ready")
	if err != nil {
		_, _ = f.WriteString(err.Error())
	} else {
		_, _ = f.WriteString("ok")
	}
	f.Close()
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "."
}
