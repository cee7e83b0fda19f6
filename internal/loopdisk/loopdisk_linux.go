package loopdisk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/flock"
	"github.com/hermes-sandbox/hermes-sandbox/internal/mountinfo"
)

// Supported tells whether this process can make disks: nil, or why not.
func Supported() error {
	if os.Geteuid() != 0 {
		return errors.New("it needs root on this host (a loop device and a mount)")
	}
	f, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("no loop devices: %w", err)
	}
	f.Close()
	if _, err := exec.LookPath("mke2fs"); err != nil {
		return errors.New("mke2fs is missing (apt-get install e2fsprogs)")
	}
	return nil
}

// Mounted reports whether the disk's file system is mounted on d.Mount.
func (d Disk) Mounted() bool {
	var st, parent unix.Stat_t
	if unix.Stat(d.Mount, &st) != nil || unix.Stat(filepath.Dir(d.Mount), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// Ensure makes the disk (size bytes, its data directory owned by uid:gid) unless it exists,
// and mounts it unless it is mounted. Processes that ensure one disk at once take turns.
func (d Disk) Ensure(ctx context.Context, size int64, uid, gid int) error {
	if err := os.MkdirAll(filepath.Dir(d.Image), 0o700); err != nil {
		return err
	}
	unlock, err := flock.LockContext(ctx, d.Image+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if d.Mounted() {
		return nil
	}
	fresh := false
	if !d.Exists() {
		if err := mkfs(ctx, d.Image, size); err != nil {
			return err
		}
		fresh = true
	}
	if err := os.MkdirAll(d.Mount, 0o700); err != nil {
		return err
	}
	if err := mount(d.Image, d.Mount); err != nil {
		if fresh {
			os.Remove(d.Image) // never mounted, holds nothing: the next try makes it anew
		}
		return err
	}
	if fresh || empty(d.Mount) { // new, or made by a process that died before this step
		err := os.Mkdir(d.Data(), 0o755)
		if err == nil || errors.Is(err, os.ErrExist) {
			err = os.Chown(d.Data(), uid, gid)
		}
		if err != nil {
			unix.Unmount(d.Mount, 0)
			os.Remove(d.Image)
			return err
		}
	}
	if _, err := os.Stat(d.Data()); err != nil {
		return fmt.Errorf("disk %s: its file system has no data directory: %w", d.Image, err)
	}
	return nil
}

// empty reports whether a file system root holds nothing but mke2fs's lost+found.
func empty(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) == 1 && entries[0].Name() == "lost+found"
}

// Remove unmounts the disk and deletes it. A disk that does not exist is no error. Its lock
// file stays (another process may be waiting on it); SweepLocks removes old ones.
func (d Disk) Remove() error {
	unlock, err := flock.Lock(d.Image + ".lock")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	defer unlock()
	if d.Mounted() {
		if err := unix.Unmount(d.Mount, 0); err != nil {
			// Still in use (a process inside, a container being torn down): detach it now;
			// the kernel frees it when the last user lets go.
			if err := unix.Unmount(d.Mount, unix.MNT_DETACH); err != nil {
				return &os.PathError{Op: "unmount", Path: d.Mount, Err: err}
			}
		}
	}
	if err := os.Remove(d.Mount); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(d.Image); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// mkfs writes a sparse ext4 image of size bytes at path, through a temporary file so that a
// failure leaves nothing behind. A small journal and lazily initialised tables keep the new
// image at a few megabytes on the host; inode tables stay uninitialised (noinit_itable at
// mount), which ext4's group checksums make safe.
func mkfs(ctx context.Context, path string, size int64) error {
	if size < 8<<20 {
		return fmt.Errorf("disk size %d bytes: at least 8 MiB", size)
	}
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		os.Remove(tmp)
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mke2fs", "-q", "-F", "-t", "ext4", "-m", "0", "-J", "size=4",
		"-E", "lazy_itable_init=1,lazy_journal_init=1", tmp)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mke2fs: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// mount attaches the image to a free loop device that detaches itself when unmounted, and
// mounts it on dir.
func mount(image, dir string) error {
	img, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer img.Close()
	loop, err := attach(img)
	if err != nil {
		return fmt.Errorf("loop device for %s: %w", image, err)
	}
	defer loop.Close() // with autoclear, the device detaches at unmount, or now if not mounted
	if err := unix.Mount(loop.Name(), dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "noinit_itable"); err != nil {
		return &os.PathError{Op: "mount " + loop.Name(), Path: dir, Err: err}
	}
	return nil
}

// attach configures a free loop device on img. Another process may take the free device
// first; then it asks for the next one.
func attach(img *os.File) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	for range 20 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
		}
		dev, err := os.OpenFile(fmt.Sprintf("/dev/loop%d", n), os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd()), Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}}
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) {
			// Before Linux 5.8: attach, then set the flags.
			if err = unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_SET_FD, int(img.Fd())); err == nil {
				if err = unix.IoctlLoopSetStatus64(int(dev.Fd()), &cfg.Info); err != nil {
					unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_CLR_FD, 0)
				}
			}
		}
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("LOOP_CONFIGURE: %w", err)
		}
	}
	return nil, errors.New("every free loop device was taken by another process first")
}

// SweepLocks removes the lock files under root of disks that are gone, once they are older
// than age (a process that waited on one has long since finished).
func SweepLocks(root string, age time.Duration) {
	locks, _ := filepath.Glob(filepath.Join(root, "*.img.lock"))
	for _, l := range locks {
		fi, err := os.Stat(l)
		if err != nil || time.Since(fi.ModTime()) < age {
			continue
		}
		if _, err := os.Stat(strings.TrimSuffix(l, ".lock")); errors.Is(err, os.ErrNotExist) {
			os.Remove(l)
		}
	}
}

// SeenBySocketPeer says whether the disks this process mounts under root are seen by the
// process listening on the unix socket sock (a container engine, which binds them into its
// containers): nil when they are or when that cannot be told, else a *NamespaceError.
func SeenBySocketPeer(sock, root string) error {
	pid, err := socketPeer(sock)
	if err != nil {
		return nil // no engine to ask: the engine's own error says more
	}
	return SeenBy(pid, root)
}

// socketPeer is the pid of the process that listens on the unix socket sock (SO_PEERCRED).
func socketPeer(sock string) (int, error) {
	conn, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	raw, err := conn.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}

// SeenBy says whether the disks this process mounts under root are seen by process pid: its
// mount namespace is ours, or the mount holding root is shared here and pid's namespace has
// a peer or slave of it, so that a mount made here propagates there. nil also when it cannot
// be told (/proc unreadable).
func SeenBy(pid int, root string) error {
	ours, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return nil
	}
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil || theirs == ours {
		return nil
	}
	nserr := &NamespaceError{Ours: ours, Theirs: theirs, Pid: pid}
	mine, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	point, tags := mountOf(string(mine), root)
	group := ""
	for _, t := range tags {
		if g, ok := strings.CutPrefix(t, "shared:"); ok {
			group = g
		}
	}
	if group == "" {
		return nserr // private or slave here: nothing made here goes out
	}
	other, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return nil
	}
	for line := range strings.SplitSeq(string(other), "\n") {
		p, tags, ok := parseMountinfo(line)
		if !ok || p != point {
			continue
		}
		for _, t := range tags {
			if t == "shared:"+group || t == "master:"+group {
				return nil
			}
		}
	}
	return nserr
}

// mountOf finds, in a mountinfo table, the mount that holds path: the last one mounted on
// the longest mount point that is path or one of its parents. It returns its mount point
// and optional fields (shared:N, master:N…).
func mountOf(table, path string) (point string, tags []string) {
	path = filepath.Clean(path)
	for line := range strings.SplitSeq(table, "\n") {
		p, t, ok := parseMountinfo(line)
		if !ok {
			continue
		}
		if p == path || p == "/" || strings.HasPrefix(path, p+"/") {
			if len(p) >= len(point) {
				point, tags = p, t
			}
		}
	}
	return point, tags
}

// parseMountinfo reads one line of /proc/PID/mountinfo: its mount point (field 5) and its
// optional fields (from field 7 to the "-" separator).
func parseMountinfo(line string) (point string, tags []string, ok bool) {
	f := strings.Fields(line)
	if len(f) < 7 {
		return "", nil, false
	}
	point = mountinfo.Unescape(f[4])
	for _, t := range f[6:] {
		if t == "-" {
			return point, tags, true
		}
		tags = append(tags, t)
	}
	return "", nil, false
}
