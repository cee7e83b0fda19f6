//go:build linux

package nsinit

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/pathtree"
)

// setup makes the init's new namespaces what spec says: nothing it mounts reaches the host
// (every mount is private), secrets and this tool's files are placeholders, /proc shows the
// new PID namespace, /dev is minimal, and a new network namespace has loopback up. It runs
// in PID 1, which has every capability in its namespaces; the commands get none of them.
func setup(spec Layout) (Report, error) {
	var rep Report
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return rep, fmt.Errorf("make mounts private: %w", err)
	}
	keep := pathtree.Clean(spec.Keep)
	// A staging tmpfs, hidden later under the state directory: the empty file placeholders
	// are bound from, and the new /dev is built in.
	stage := filepath.Join(spec.SockDir, "stage")
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return rep, err
	}
	if err := unix.Mount("tmpfs", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return rep, fmt.Errorf("mount a staging tmpfs: %w", err)
	}
	empty := filepath.Join(stage, "empty")
	if err := os.WriteFile(empty, nil, 0o000); err != nil {
		return rep, err
	}
	// The session's own directory, to be bound back under a hidden state directory.
	stateFD, err := unix.Open(spec.StateDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return rep, fmt.Errorf("open the session's state directory: %w", err)
	}
	defer unix.Close(stateFD)

	denied, absent := 0, 0
	for _, p := range spec.DenyRead {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			absent++
			continue
		}
		if k := holdsAny(real, keep); k != "" {
			rep.Missing = append(rep.Missing, fmt.Sprintf("deny_read %s is left readable: it holds %s, which commands work in", p, k))
			continue
		}
		if err := maskPath(real, empty, 0o000); err != nil {
			return rep, fmt.Errorf("deny_read %s: %w", p, err)
		}
		denied++
	}
	rep.Enforced = append(rep.Enforced, fmt.Sprintf("deny_read: %d paths unreadable (%d more are absent now; those created later are masked when the session's namespaces next start)", denied, absent))

	if err := minimalDev(stage); err != nil {
		return rep, fmt.Errorf("a minimal /dev: %w", err)
	}
	rep.Enforced = append(rep.Enforced, "a minimal /dev (no disks)")

	// Last, since the staging tmpfs lies under the state directory.
	hidden := 0
	for _, h := range outermost(pathtree.Clean(spec.Hide)) {
		if _, err := os.Stat(h); err != nil {
			continue
		}
		if k := holdsAny(h, keep); k != "" {
			rep.Missing = append(rep.Missing, fmt.Sprintf("%s (this tool's files) stays visible: it holds %s, which commands work in", h, k))
			continue
		}
		if err := hideDir(h, spec.StateDir, stateFD); err != nil {
			return rep, fmt.Errorf("hide %s: %w", h, err)
		}
		hidden++
	}
	rep.Enforced = append(rep.Enforced, fmt.Sprintf("this tool's state, config and audit directories are invisible (%d hidden)", hidden))

	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return rep, fmt.Errorf("mount /proc for the new PID namespace: %w", err)
	}
	rep.Enforced = append(rep.Enforced, "a PID namespace: no process of the caller or this tool is visible")
	switch spec.Network {
	case NetworkNone, NetworkAllowlist:
		if err := loopbackUp(); err != nil {
			return rep, fmt.Errorf("bring loopback up: %w", err)
		}
		if spec.Network == NetworkNone {
			rep.Enforced = append(rep.Enforced, "network none: a network namespace with loopback only")
		} else {
			rep.Enforced = append(rep.Enforced, "network allowlist: a network namespace whose only way out is the filtering proxy")
		}
	default:
		rep.Enforced = append(rep.Enforced, "network host: the host's network, as configured")
	}
	return rep, nil
}

// maskPath covers p with an empty read-only placeholder: a tmpfs nobody may open for a
// directory, the empty file for anything else.
func maskPath(p, empty string, mode os.FileMode) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if fi.IsDir() {
		return unix.Mount("tmpfs", p, "tmpfs", flags|unix.MS_RDONLY, fmt.Sprintf("mode=%04o,size=4k", mode))
	}
	if err := unix.Mount(empty, p, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|flags, "")
}

// hideDir covers dir with an empty read-only tmpfs. When the session's state directory lies
// below it, the way down to it is kept (directories that can be passed but not listed) and
// the state directory bound back from its descriptor.
func hideDir(dir, state string, stateFD int) error {
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if !pathtree.Within(state, dir) {
		return unix.Mount("tmpfs", dir, "tmpfs", flags|unix.MS_RDONLY, "mode=0000,size=4k")
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, "mode=0711,size=4k"); err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, state)
	if err != nil {
		return err
	}
	p := dir
	for _, part := range strings.Split(rel, "/") {
		if part == "." {
			continue
		}
		p = filepath.Join(p, part)
		if err := os.Mkdir(p, 0o711); err != nil && !os.IsExist(err) {
			return err
		}
	}
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", stateFD), state, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the session's directory back: %w", err)
	}
	return unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, "mode=0711,size=4k")
}

// devNodes are the host's devices a command may open.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// devPassthrough are device trees passed through when present: GPUs and KVM, which hold no
// data of the host's.
var devPassthrough = []string{"dri", "kvm", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset",
	"nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidia4", "nvidia5", "nvidia6", "nvidia7"}

// minimalDev replaces /dev with a tmpfs holding the devices in devNodes (bound from the
// host's), a new devpts instance, a private /dev/shm and the usual links: no disk, no
// terminal of the caller's, no other device.
func minimalDev(stage string) error {
	dev := filepath.Join(stage, "dev")
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	bind := func(name string) error {
		src := filepath.Join("/dev", name)
		fi, err := os.Stat(src)
		if err != nil {
			return err
		}
		dst := filepath.Join(dev, name)
		if fi.IsDir() {
			err = os.Mkdir(dst, 0o755)
		} else {
			err = os.WriteFile(dst, nil, 0o600)
		}
		if err != nil {
			return err
		}
		return unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, "")
	}
	for _, n := range devNodes {
		if err := bind(n); err != nil {
			return fmt.Errorf("/dev/%s: %w", n, err)
		}
	}
	for _, n := range devPassthrough {
		if _, err := os.Stat(filepath.Join("/dev", n)); err == nil {
			_ = bind(n)
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	if err := unix.Mount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("/dev/shm: %w", err)
	}
	for name, target := range map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "core": "/proc/kcore"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	if err := unix.Mount(dev, "/dev", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move it onto /dev: %w", err)
	}
	return unix.Mount("", "/dev", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k")
}

// loopbackUp brings up lo in the new network namespace, so servers a command starts on
// 127.0.0.1 answer.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// holdsAny returns the first of keep that lies in (or is) p, or "".
func holdsAny(p string, keep []string) string {
	for _, k := range keep {
		if pathtree.Within(k, p) {
			return k
		}
	}
	return ""
}

// outermost drops duplicates and the paths that lie in another of ps.
func outermost(ps []string) []string {
	sort.Strings(ps)
	var out []string
	for _, p := range ps {
		if len(out) > 0 && pathtree.Within(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}
