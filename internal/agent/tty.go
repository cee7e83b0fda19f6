//go:build unix

package agent

import (
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// startTTY runs an interactive shell on a pseudo-terminal in the session's directory and
// environment. Its output arrives as stdout frames; stdin frames are keystrokes. The session's
// saved state is not changed by what happens in an interactive shell.
func (s *Server) startTTY(id uint32, req RunRequest) {
	p, err := s.prepare(RunRequest{Argv: []Bytes{"true"}, Dir: req.Dir, Env: req.Env})
	if err != nil {
		s.sendErrFrom(id, err)
		return
	}
	cmd := exec.Command(s.shell, "-i")
	cmd.Dir, cmd.Env = p.cwd, p.env
	if envGet(p.env, "TERM") == "" {
		cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	}
	size := &pty.Winsize{Rows: req.Rows, Cols: req.Cols}
	if size.Rows == 0 || size.Cols == 0 {
		size = &pty.Winsize{Rows: 24, Cols: 80}
	}
	start := time.Now()
	var ptmx *os.File
	s.startProcess(func() { ptmx, err = pty.StartWithAttrs(cmd, size, &syscall.SysProcAttr{Setsid: true, Setctty: true}) })
	if err != nil {
		s.sendErrFrom(id, err)
		return
	}
	rn := &run{s: s, id: id, proc: cmd.Process, stdin: ptmx, pty: ptmx}
	s.mu.Lock()
	s.runs[id] = rn
	s.mu.Unlock()
	s.goTracked(func() {
		done := make(chan struct{})
		var exited atomic.Bool
		go func() {
			defer close(done)
			buf := make([]byte, 32<<10)
			polled := !goPolled(ptmx)
			for {
				if polled && !ttyReadable(ptmx, &exited) {
					return
				}
				n, err := ptmx.Read(buf)
				if n > 0 {
					_ = s.out.write(tStdout, id, buf[:n])
				}
				if err != nil {
					return
				}
			}
		}()
		rn.waitExit()
		reason := rn.markExited()
		_ = cmd.Wait()
		// Let the last output drain, then close the terminal.
		exited.Store(true)
		ptmx.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		<-done
		rn.stdinMu.Lock()
		rn.stdin = nil
		rn.stdinMu.Unlock()
		ptmx.Close()
		s.mu.Lock()
		delete(s.runs, id)
		s.mu.Unlock()
		ex := ExitInfo{Code: cmd.ProcessState.ExitCode(), Cwd: p.cwd, DurationNS: int64(time.Since(start))}
		if ex.Code < 0 {
			ex.Code = 128 + int(syscall.SIGKILL)
		}
		if reason == reasonInterrupt {
			ex.Code, ex.Interrupted = 130, true
		}
		_ = s.send(tExit, id, ex)
	})
}

func (rn *run) resize(rows, cols uint16) {
	if rn.pty != nil && rows > 0 && cols > 0 {
		_ = pty.Setsize(rn.pty, &pty.Winsize{Rows: rows, Cols: cols})
	}
}

// The terminal's output ends, under Linux, with a read error (EIO) once the shell's side is
// closed, or else at the read deadline set after the shell exits. gVisor (docker.runtime
// runsc) gives neither: its terminal master never reports the hang-up, and Go's runtime
// cannot poll it, so the master stays in blocking mode and its deadline does nothing; the
// reader then waited forever and the shell never ended for the client. There each read waits
// for poll(2) first, and the reader ends when the shell has exited and nothing is waiting.

// goPolled reports whether f is in Go's poller (non-blocking), so that its read deadline works.
func goPolled(f *os.File) bool {
	sc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	flags := 0
	if err := sc.Control(func(fd uintptr) { flags, _ = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		return false
	}
	return flags&unix.O_NONBLOCK != 0
}

// ttyReadable waits until f has something to read (or poll reports an error or hang-up, which
// the read then returns), and returns false once exited is set and nothing is waiting.
func ttyReadable(f *os.File, exited *atomic.Bool) bool {
	sc, err := f.SyscallConn()
	if err != nil {
		return true // the read reports it
	}
	for {
		ready := false
		if err := sc.Control(func(fd uintptr) {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(p, 100)
			ready = n > 0 || (err != nil && err != unix.EINTR)
		}); err != nil {
			return true
		}
		if ready {
			return true
		}
		if exited.Load() {
			return false
		}
	}
}
