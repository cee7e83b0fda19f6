//go:build linux

package nsinit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// The re-executed binary becomes the init (or a probe) before the rest of it is initialised.
func init() {
	switch os.Getenv(EnvRole) {
	case RoleInit:
		os.Exit(runInit())
	case RoleProbe:
		os.Exit(runProbe())
	}
}

// runProbe does in new namespaces what an init does first (see Probe).
func runProbe() int {
	err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
	if err == nil {
		err = unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4k")
	}
	if err == nil {
		err = unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mount in the new namespaces:", err)
		return 1
	}
	return 0
}

// runInit is PID 1 of the session's namespaces: it sets up the mounts and the network,
// starts the server, reaps orphans, and exits (taking every process inside with it) when the
// server does.
func runInit() int {
	os.Unsetenv(EnvRole)
	lf := os.NewFile(3, "listener")
	specR := os.NewFile(4, "spec")
	status := os.NewFile(5, "status")
	fail := func(err error) int {
		fmt.Fprintf(status, "error %s\n", OneLine(err.Error()))
		fmt.Fprintln(os.Stderr, "hermes-sandbox init:", err)
		return 1
	}
	raw, err := io.ReadAll(specR)
	specR.Close()
	var spec Layout
	if err == nil {
		err = json.Unmarshal(raw, &spec)
	}
	if err != nil {
		return fail(fmt.Errorf("read the spec: %w", err))
	}
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	rep, err := setup(spec)
	if err != nil {
		return fail(err)
	}
	// The helper gets no capability: the ambient ones the init was given (without root) are
	// dropped from this thread, the one package initialisation runs on and the helper is
	// forked from.
	if err := dropInheritable(); err != nil {
		return fail(fmt.Errorf("drop ambient capabilities: %w", err))
	}
	// The server gets the spec and the report on a pipe, and the listener.
	pr, pw, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"hermes-sandbox-helper", spec.Session}
	cmd.Env = []string{EnvRole + "=" + RoleServer, "PATH=" + os.Getenv("PATH")}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{lf, pr}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("start the helper: %w", err))
	}
	pr.Close()
	lf.Close()
	_ = json.NewEncoder(pw).Encode(ServerSpec{Spec: raw, Report: rep})
	pw.Close()
	fmt.Fprintln(status, "ok")
	status.Close()
	server := cmd.Process.Pid
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid == server {
			return 0
		}
	}
}

// dropInheritable clears the calling thread's ambient and inheritable capabilities (the
// latter would pass on to a program with inheritable file capabilities).
func dropInheritable() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	return unix.Capset(&hdr, &data[0])
}
