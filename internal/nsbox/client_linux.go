//go:build linux

package nsbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/flock"
	"github.com/hermes-sandbox/hermes-sandbox/internal/nsbox/nsinit"
)

// startTimeout bounds an init's set-up, from fork to its first answer.
const startTimeout = 15 * time.Second

// request is the first line a client sends on a new connection.
type request struct {
	Op     string  `json:"op"` // serve, relay, stop
	Helper *Helper `json:"helper,omitempty"`
}

// Ops of a request.
const (
	opServe = "serve"
	opRelay = "relay"
	opStop  = "stop"
)

// ErrNotRunning: no init of the session runs (Stop).
var ErrNotRunning = errors.New("nsbox: the session's namespaces are not running")

// Serve connects to the session's helper inside its namespaces, starting them first when none
// run. The connection then carries the helper protocol (agent.NewClient).
func Serve(ctx context.Context, spec Spec, h Helper) (net.Conn, Report, error) {
	return dial(ctx, spec, request{Op: opServe, Helper: &h}, true)
}

// Relay connects to a new egress relay inside the session's network namespace (listening on
// egress.RelayAddr there): the connection carries the multiplexed stream of package
// egress/mux, as a docker relay's exec stream does.
func Relay(ctx context.Context, spec Spec) (net.Conn, error) {
	c, _, err := dial(ctx, spec, request{Op: opRelay}, false)
	return c, err
}

// Stop ends every init of the session (whatever spec it was started with): every process
// inside is killed. It returns once they are gone.
func Stop(sockDir, session string) error {
	matches, _ := filepath.Glob(filepath.Join(sockDir, session+"-*.sock"))
	var errs []error
	for _, m := range matches {
		base := strings.TrimSuffix(filepath.Base(m), ".sock")
		if strings.Count(base[len(session):], "-") != 1 {
			continue // another session whose name starts with this one's
		}
		c, err := dialSock(sockDir, base+".sock")
		if err != nil {
			os.Remove(m) // a dead init's
			continue
		}
		if _, err := exchange(c, request{Op: opStop}); err != nil {
			errs = append(errs, err)
		}
		// The server exits after its answer; its end of the socket closes with it.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var b [1]byte
		_, _ = c.Read(b[:])
		c.Close()
		os.Remove(m)
	}
	return errors.Join(errs...)
}

func names(spec Spec) (sock, lock, log string) {
	base := spec.Session + "-" + spec.key()
	return base + ".sock", filepath.Join(spec.SockDir, base+".lock"), filepath.Join(spec.SockDir, base+".log")
}

// dial connects and sends req, starting the session's init when none answers and start is
// set. An init that was exiting as we connected is started again.
func dial(ctx context.Context, spec Spec, req request, start bool) (net.Conn, Report, error) {
	if err := os.MkdirAll(spec.SockDir, 0o700); err != nil {
		return nil, Report{}, fmt.Errorf("nsbox: %w", err)
	}
	sock, lockPath, _ := names(spec)
	var lastErr error
	for try := 0; try < 3; try++ {
		if c, err := dialSock(spec.SockDir, sock); err == nil {
			rep, err := exchange(c, req)
			if err == nil {
				return c, rep, nil
			}
			c.Close()
			var refused *refusal
			if errors.As(err, &refused) {
				return nil, Report{}, err
			}
			lastErr = err
		}
		if !start {
			return nil, Report{}, fmt.Errorf("%w (session %s)", ErrNotRunning, spec.Session)
		}
		unlock, err := flock.LockContext(ctx, lockPath)
		if err != nil {
			return nil, Report{}, fmt.Errorf("nsbox: lock %s: %w", lockPath, err)
		}
		c, err := dialSock(spec.SockDir, sock)
		if err != nil {
			err = startInit(ctx, spec)
		} else {
			c.Close()
		}
		unlock()
		if err != nil {
			return nil, Report{}, err
		}
	}
	return nil, Report{}, fmt.Errorf("nsbox: the session's init did not answer: %w", lastErr)
}

// refusal is an init's answer other than ok: it answered, and said no.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// exchange sends req and reads the one-line answer, "ok REPORT" or "error MESSAGE", a byte at
// a time so nothing after it is taken from the connection.
func exchange(c net.Conn, req request) (Report, error) {
	b, _ := json.Marshal(req)
	_ = c.SetDeadline(time.Now().Add(startTimeout))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(append(b, '\n')); err != nil {
		return Report{}, err
	}
	line, err := readLine(c, 1<<20)
	if err != nil {
		return Report{}, fmt.Errorf("nsbox: no answer from the session's init: %w", err)
	}
	word, rest, _ := strings.Cut(line, " ")
	switch word {
	case "ok":
		var rep Report
		if rest != "" {
			_ = json.Unmarshal([]byte(rest), &rep)
		}
		return rep, nil
	case "error":
		return Report{}, &refusal{msg: "nsbox: " + rest}
	}
	return Report{}, fmt.Errorf("nsbox: unexpected answer %q", line)
}

func readLine(c net.Conn, max int) (string, error) {
	var out []byte
	var b [1]byte
	for len(out) < max {
		n, err := c.Read(b[:])
		if n == 1 {
			if b[0] == '\n' {
				return string(out), nil
			}
			out = append(out, b[0])
			continue
		}
		if err != nil {
			return "", err
		}
	}
	return "", errors.New("answer too long")
}

// dialSock connects to a socket in dir through a descriptor of dir (a state directory's path
// can be longer than a socket address allows).
func dialSock(dir, name string) (net.Conn, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return net.Dial("unix", fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name))
}

// listenSock listens on a new socket in dir (removing a dead one).
func listenSock(dir, name string) (*net.UnixListener, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	os.Remove(filepath.Join(dir, name))
	l, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name))
	if err != nil {
		return nil, err
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	return ul, nil
}

// startInit starts the session's init: this binary again, as PID 1 of new namespaces, with
// the listening socket, the spec and a status pipe. It returns once the init has set them
// up (or said why it could not).
func startInit(ctx context.Context, spec Spec) error {
	sock, _, logPath := names(spec)
	l, err := listenSock(spec.SockDir, sock)
	if err != nil {
		return fmt.Errorf("nsbox: listen: %w", err)
	}
	lf, err := l.File()
	l.Close()
	if err != nil {
		return fmt.Errorf("nsbox: listen: %w", err)
	}
	defer lf.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer specR.Close()
	defer specW.Close()
	statR, statW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer statR.Close()
	defer statW.Close()
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()

	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"hermes-sandbox-init", spec.Session}
	cmd.Env = []string{nsinit.EnvRole + "=" + nsinit.RoleInit, "PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{lf, specR, statW} // 3, 4, 5
	cmd.SysProcAttr = sysProcAttr(spec)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("nsbox: start the session's namespaces: %w", explainClone(err))
	}
	go func() { _ = cmd.Wait() }() // reaped whenever it ends; it outlives most callers
	specR.Close()
	statW.Close()
	b, _ := json.Marshal(spec)
	if _, err := specW.Write(b); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("nsbox: hand the spec to the init: %w", err)
	}
	specW.Close()

	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(statR).ReadString('\n')
		ch <- answer{strings.TrimSpace(line), err}
	}()
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case a := <-ch:
		if a.line == "ok" {
			return nil
		}
		_ = cmd.Process.Kill()
		msg := strings.TrimPrefix(a.line, "error ")
		if msg == "" {
			msg = "it exited before it was ready"
			if tail := logTail(logPath); tail != "" {
				msg += ": " + tail
			}
		}
		return fmt.Errorf("nsbox: the session's namespaces could not be set up: %s", msg)
	case <-t.C:
		_ = cmd.Process.Kill()
		return fmt.Errorf("nsbox: the session's init did not get ready within %s (log: %s)", startTimeout, logPath)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return ctx.Err()
	}
}

func logTail(p string) string {
	b, _ := os.ReadFile(p)
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[len(s)-500:]
	}
	return s
}

// sysProcAttr is how the init is cloned: new mount, PID and IPC namespaces (and network
// unless the host's is shared), in a session of its own; without root, all of them inside a
// new user namespace where the user is themselves.
func sysProcAttr(spec Spec) *syscall.SysProcAttr {
	flags := uintptr(syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC)
	if spec.Network != NetworkHost {
		flags |= syscall.CLONE_NEWNET
	}
	a := &syscall.SysProcAttr{Setsid: true, Cloneflags: flags}
	if os.Getuid() != 0 {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
		// The user is themselves inside, not root, so the init keeps what it needs to set the
		// namespaces up only as ambient capabilities (it drops them before it starts the
		// helper).
		a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN}
	}
	return a
}

// Probe reports whether this process can make a session's namespaces for network (nil), or
// why not: it starts this binary in new namespaces, which mounts a tmpfs and a /proc there.
func Probe(network Network) error {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"hermes-sandbox-probe"}
	cmd.Env = []string{nsinit.EnvRole + "=" + nsinit.RoleProbe}
	cmd.Dir = "/"
	cmd.SysProcAttr = sysProcAttr(Spec{Layout: nsinit.Layout{Network: network}})
	cmd.SysProcAttr.Setsid = false
	out, err := cmd.CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%s (%w)", msg, explainClone(err))
		}
		return explainClone(err)
	}
	return nil
}

// explainClone says why namespaces could not be created.
func explainClone(err error) error {
	if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.EACCES) {
		return err
	}
	if os.Getuid() == 0 {
		return fmt.Errorf("%w (creating mount, PID and network namespaces failed even as root: a container without CAP_SYS_ADMIN?)", err)
	}
	return fmt.Errorf("%w (unprivileged user namespaces are off here: see %s)", err, userNSHint())
}

// userNSHint names the settings that turn unprivileged user namespaces off.
func userNSHint() string {
	var hints []string
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		hints = append(hints, "sysctl kernel.unprivileged_userns_clone=0")
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		hints = append(hints, "sysctl user.max_user_namespaces=0")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
		hints = append(hints, "sysctl kernel.apparmor_restrict_unprivileged_userns=1 (AppArmor)")
	}
	if len(hints) == 0 {
		return "the kernel's user namespace settings"
	}
	return strings.Join(hints, ", ")
}
