package ssh

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// DialError is a failure to reach or log in to a host (or a jump host on the way).
type DialError struct {
	Role      string // "host" or "jump host"
	Endpoint  endpoint
	Timeout   time.Duration
	Handshake bool // the TCP connection was made; the SSH handshake failed
	Err       error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("connect to %s %s: %s", e.Role, e.Endpoint.String(), e.explain())
}

func (e *DialError) Unwrap() error { return e.Err }

// Is makes connection failures match sandbox.ErrUnavailable and refusals of trust or
// credentials match sandbox.ErrDenied.
func (e *DialError) Is(target error) bool {
	var hke *HostKeyError
	var ae *AuthError
	switch target {
	case sandbox.ErrDenied:
		return errors.As(e.Err, &hke) || errors.As(e.Err, &ae)
	case sandbox.ErrUnavailable:
		return !errors.As(e.Err, &hke) && !errors.As(e.Err, &ae) && !errors.Is(e.Err, context.Canceled)
	}
	return false
}

// explain says what went wrong and what to do.
func (e *DialError) explain() string {
	addr := e.Endpoint.addr()
	var dns *net.DNSError
	var hke *HostKeyError
	var ae *AuthError
	switch {
	case errors.As(e.Err, &hke), errors.As(e.Err, &ae):
		return e.Err.Error()
	case errors.Is(e.Err, context.Canceled):
		return "cancelled"
	case errors.As(e.Err, &dns):
		hint := "check ssh.host"
		if e.Endpoint.alias != e.Endpoint.host {
			hint = "check HostName for " + e.Endpoint.alias + " in ~/.ssh/config"
		}
		if dns.IsNotFound {
			return fmt.Sprintf("cannot resolve host name %q (no such host): %s", e.Endpoint.host, hint)
		}
		return fmt.Sprintf("cannot resolve host name %q (%v): check DNS on this machine, or %s", e.Endpoint.host, dns.Err, hint)
	case errors.Is(e.Err, syscall.ECONNREFUSED):
		return fmt.Sprintf("connection refused by %s: no SSH server listens on port %d there; check ssh.port and that sshd is running", addr, e.Endpoint.port)
	case errors.Is(e.Err, errConnectTimeout):
		what := "the host is down, or a firewall drops the connection"
		if e.Handshake {
			what = "the TCP connection opened but the SSH handshake did not finish; is this an SSH server?"
		}
		return fmt.Sprintf("no answer from %s within %s (ssh.connect_timeout): %s", addr, e.Timeout, what)
	case errors.Is(e.Err, syscall.EHOSTUNREACH), errors.Is(e.Err, syscall.ENETUNREACH):
		return fmt.Sprintf("%s is unreachable from this machine (%v): check the address and your network or VPN", addr, e.Err)
	case e.Handshake:
		return fmt.Sprintf("SSH handshake with %s failed: %v: is an SSH server listening on that port?", addr, e.Err)
	}
	return e.Err.Error()
}

// Diagnose explains a failure of this backend in one sentence that says what to do next,
// for `hermes-sandbox setup ssh` and `doctor`. Errors from Check, Open and Exec already carry
// this explanation; Diagnose returns it alone, without the operation prefix, or "" when err
// is not an ssh backend failure it recognises.
func Diagnose(err error) string {
	var de *DialError
	var ue *UploadError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &de):
		return de.explain()
	case errors.As(err, &ue):
		return ue.Error()
	case errors.Is(err, sandbox.ErrInvalidConfig):
		var se *sandbox.Error
		if errors.As(err, &se) {
			return se.Err.Error()
		}
		return err.Error()
	}
	return ""
}

// UploadError is a failure to install the helper on the remote host.
type UploadError struct {
	Host string
	Path string
	// DiskFull says the remote file system ran out of space.
	DiskFull bool
	Free     int64
	Need     int64
	Err      error
}

func (e *UploadError) Error() string {
	if e.DiskFull {
		return fmt.Sprintf("upload the sandbox helper to %s:%s: the remote disk is full (%s free, %s needed); nothing was left behind: free some space there and retry",
			e.Host, e.Path, human(e.Free), human(e.Need))
	}
	return fmt.Sprintf("upload the sandbox helper to %s:%s: %v", e.Host, e.Path, e.Err)
}

func (e *UploadError) Unwrap() error { return e.Err }

func human(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// wrap makes err a *sandbox.Error of this backend (unless it is one already).
func wrap(op, id string, err error) error { return sandbox.Wrap(Name, op, id, err, nil) }

// oneLine trims remote output for an error message.
func oneLine(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	s = strings.ReplaceAll(s, "\n", " | ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// fsError maps an SFTP failure to the sandbox sentinels.
func fsError(op, p string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s %s: %w", op, p, errors.Join(sandbox.ErrNotFound, fs.ErrNotExist))
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%s %s: %w", op, p, fs.ErrPermission)
	}
	return fmt.Errorf("%s %s: %w", op, p, err)
}
