//go:build linux && (amd64 || arm64)

package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/mountinfo"
)

// inPoolContainer refuses a reset anywhere but where it belongs: a helper exec'd into a
// container (its parent is outside the container's PID namespace, so it sees parent 0) whose
// PID 1 is the idle helper. A reset ends every other process this user may signal; on a host
// that would be the user's whole session.
func inPoolContainer() error {
	if os.Getpid() == 1 || os.Getppid() != 0 {
		return errors.New("this helper was not exec'd into a container of its own")
	}
	b, err := os.ReadFile("/proc/1/cmdline")
	if err != nil {
		return fmt.Errorf("read PID 1's command line: %w", err)
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(args) < 2 || filepath.Base(args[0]) != "sandbox-agent" || args[len(args)-1] != "idle" {
		return errors.New("PID 1 is not the sandbox helper's idle process")
	}
	return nil
}

// refuseTracing makes this process non-dumpable: without CAP_SYS_PTRACE, processes of the
// same user can then neither trace it nor read or write its memory (/proc/PID/mem,
// process_vm_writev), so a task cannot plant code in the helper that serves the next one.
func refuseTracing() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// RefuseTracing is refuseTracing for the idle entrypoint (PID 1 of a pool container).
func RefuseTracing() error { return refuseTracing() }

// otherProcesses lists the processes of the PID namespace but PID 1 and this one (zombies
// included: they are gone only once reaped).
func otherProcesses() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return []int{-1}
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 || pid == self {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// killOthers kills every other process (PID 1, the idle helper, ignores signals from inside
// its namespace) until none is left or the deadline passes; it returns those left. Each round
// kills what it sees, so a process forking meanwhile is taken in the next; the children of
// this process are reaped here (PID 1 reaps the orphans).
func killOthers(deadline time.Time) []int {
	for {
		left := otherProcesses()
		if len(left) == 0 {
			return nil
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
		if time.Now().After(deadline) {
			return otherProcesses()
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ipcKinds are the System V IPC objects of the container's IPC namespace, with how each is
// removed.
var ipcKinds = []struct {
	name, file string
	rm         func(id int) error
}{
	{"shared memory", "/proc/sysvipc/shm", func(id int) error {
		_, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		return err
	}},
	{"semaphore set", "/proc/sysvipc/sem", func(id int) error {
		_, _, e := unix.Syscall6(unix.SYS_SEMCTL, uintptr(id), 0, uintptr(unix.IPC_RMID), 0, 0, 0)
		return errnoErr(e)
	}},
	{"message queue", "/proc/sysvipc/msg", func(id int) error {
		_, _, e := unix.Syscall(unix.SYS_MSGCTL, uintptr(id), uintptr(unix.IPC_RMID), 0)
		return errnoErr(e)
	}},
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// listIPC lists the System V IPC objects, as "kind id".
func listIPC() []string {
	var out []string
	for _, k := range ipcKinds {
		b, err := os.ReadFile(k.file)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				out = append(out, k.name+": "+err.Error())
			}
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, l := range lines[1:] { // the first line names the columns
			if f := strings.Fields(l); len(f) > 1 {
				out = append(out, k.name+" "+f[1])
			}
		}
	}
	return out
}

// removeIPC removes every System V IPC object and returns what it could not remove.
func removeIPC() []string {
	var problems []string
	for _, k := range ipcKinds {
		b, err := os.ReadFile(k.file)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			id, err := strconv.Atoi(f[1])
			if err == nil {
				err = k.rm(id)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("remove %s %s: %v", k.name, f[1], err))
			}
		}
	}
	return problems
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	point, fstype, opts string
	rw                  bool
}

func mounts() ([]mountEntry, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []mountEntry
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 6 || len(g) < 1 {
			return nil, fmt.Errorf("mountinfo line %q", l)
		}
		opts := f[5]
		out = append(out, mountEntry{point: mountinfo.Unescape(f[4]), fstype: g[0], opts: opts,
			rw: strings.Split(opts, ",")[0] == "rw"})
	}
	return out, nil
}

// virtualFS are filesystems whose entries are the kernel's view, not files a task leaves.
var virtualFS = map[string]bool{"proc": true, "sysfs": true, "cgroup": true, "cgroup2": true, "devpts": true}

// fingerprint describes every mount and everything on a writable one (but those under skip
// and the kernel's views): one sorted line per mount and per entry.
func fingerprint(skip []string, problem func(string)) []string {
	ms, err := mounts()
	if err != nil {
		problem("read the mounts: " + err.Error())
		return nil
	}
	points := map[string]bool{}
	for _, m := range ms {
		points[m.point] = true
	}
	under := func(p, root string) bool { return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/") }
	lines := map[string]bool{}
	for _, m := range ms {
		lines[fmt.Sprintf("mount %q %s %s", m.point, m.fstype, m.opts)] = true
		if !m.rw || virtualFS[m.fstype] || under(m.point, "/proc") || under(m.point, "/sys") {
			continue
		}
		skipped := false
		for _, s := range skip {
			skipped = skipped || under(m.point, s)
		}
		if skipped {
			continue
		}
		var walk func(p string)
		walk = func(p string) {
			l, isDir := describe(p)
			lines[l] = true
			if !isDir {
				return
			}
			ents, err := os.ReadDir(p)
			if err != nil {
				problem("read " + p + ": " + err.Error())
				return
			}
			for _, e := range ents {
				q := filepath.Join(p, e.Name())
				if !points[q] { // another mount: described on its own
					walk(q)
				}
			}
		}
		walk(m.point)
	}
	return sortedLines(lines)
}

// describe is one fingerprint line for the entry at p, and whether it is a directory.
func describe(p string) (string, bool) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return fmt.Sprintf("entry %q: %v", p, err), false
	}
	l := fmt.Sprintf("entry %q mode %o owner %d:%d", p, st.Mode, st.Uid, st.Gid)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		l += fmt.Sprintf(" size %d sha256 %s", st.Size, fileHash(p, st.Size))
	case unix.S_IFLNK:
		t, _ := os.Readlink(p)
		l += fmt.Sprintf(" target %q", t)
	case unix.S_IFCHR, unix.S_IFBLK:
		l += fmt.Sprintf(" device %d", st.Rdev)
	}
	if names := xattrNames(p); names != "" {
		l += " xattrs " + names
	}
	return l, st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// fileHash hashes a file of up to 1 MiB (a larger one is described by its size).
func fileHash(p string, size int64) string {
	if size > 1<<20 {
		return "(large)"
	}
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, 1<<20)); err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return hex.EncodeToString(h.Sum(nil))
}

// xattrNames lists the extended attribute names of p ("" when none or unsupported).
func xattrNames(p string) string {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if err != nil || n <= 0 {
		return ""
	}
	return strings.ReplaceAll(strings.TrimRight(string(buf[:n]), "\x00"), "\x00", ",")
}

// sortedLines returns the set's lines, sorted.
func sortedLines(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}
