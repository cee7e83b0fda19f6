package owner

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// A call runs in the owner's process, so it must come from a process that an exec in its own
// process would have run as: same binary, directory, environment and process context. The
// client says what it is in its key; the owner checks every part of that against the
// connecting process itself (SO_PEERCRED's pid, /proc), so that nothing a client claims is
// taken on trust — not its environment, not a terminal it does not have.

// statusFields are the lines of /proc/PID/status that say what a process may do.
var statusFields = []string{"Uid:", "Gid:", "Groups:", "Umask:", "NoNewPrivs:", "Seccomp:",
	"CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}

// namespaces are those a process runs in (/proc/PID/ns/*).
var namespaces = []string{"cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts"}

// procContext describes what process pid ("self" or a number) runs under besides its
// binary, directory and environment: credentials, capabilities, no_new_privs (which Landlock
// and seccomp confinement imply), seccomp, namespaces, cgroup, resource limits and nice.
// tty reports whether it has a controlling terminal, which is not part of the context (an
// owner has none, and serves callers that do).
func procContext(pid string) (ctx string, tty bool, err error) {
	dir := "/proc/" + pid + "/"
	var b strings.Builder
	status, err := os.ReadFile(dir + "status")
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		for _, f := range statusFields {
			if strings.HasPrefix(line, f) {
				b.WriteString(strings.Join(strings.Fields(line), " "))
				b.WriteByte('\n')
			}
		}
	}
	for _, ns := range namespaces {
		l, err := os.Readlink(dir + "ns/" + ns)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", false, err
		}
		b.WriteString(l + "\n")
	}
	for _, f := range []string{"cgroup", "limits"} {
		data, err := os.ReadFile(dir + f)
		if err != nil {
			return "", false, err
		}
		b.Write(data)
	}
	stat, err := os.ReadFile(dir + "stat")
	if err != nil {
		return "", false, err
	}
	// After "pid (comm) ": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime priority nice …
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false, errors.New("owner: unreadable " + dir + "stat")
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 17 {
		return "", false, errors.New("owner: short " + dir + "stat")
	}
	b.WriteString("nice " + fields[16] + "\n")
	return b.String(), fields[4] != "0", nil
}

// fileIdentity names a file by device, inode, size and modification time.
func fileIdentity(p string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: p, Err: err}
	}
	return strconv.FormatUint(st.Dev, 10) + ":" + strconv.FormatUint(st.Ino, 10) + ":" +
		strconv.FormatInt(st.Size, 10) + ":" + strconv.FormatInt(st.Mtim.Nano(), 10), nil
}

// exeIdentity names process pid's binary, so that a rebuilt or replaced one never reaches an
// owner started from the old one.
func exeIdentity(pid string) (string, error) {
	p, err := os.Readlink("/proc/" + pid + "/exe")
	if err != nil {
		return "", fmt.Errorf("owner: find the running binary: %w", err)
	}
	id, err := fileIdentity("/proc/" + pid + "/exe")
	if err != nil {
		return "", err
	}
	return p + "|" + id, nil
}

// cwdIdentity names process pid's working directory: its path and the directory itself (a
// directory removed and made again under the same name is another one).
func cwdIdentity(pid, path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+pid+"/cwd", &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: "/proc/" + pid + "/cwd", Err: err}
	}
	return path + "|" + strconv.FormatUint(st.Dev, 10) + ":" + strconv.FormatUint(st.Ino, 10), nil
}

// VerifyPeer checks that process pid is what hello says it is: its binary, working
// directory, environment, umask and process context are the key's, and it has a controlling
// terminal exactly when the hello says so.
func VerifyPeer(pid int, h Hello) error {
	p := strconv.Itoa(pid)
	ctx, tty, err := procContext(p)
	if err != nil {
		return err
	}
	if ctx != h.Key.Ctx {
		return errors.New("its process context (credentials, confinement, namespaces, cgroup, limits or nice) is another")
	}
	if tty != h.TTY {
		return errors.New("it says it has a terminal and has none, or the other way round")
	}
	exe, err := exeIdentity(p)
	if err != nil {
		return err
	}
	if exe != h.Key.Exe {
		return errors.New("it runs another binary")
	}
	path, _, _ := strings.Cut(h.Key.Cwd, "|")
	cwd, err := cwdIdentity(p, path)
	if err != nil {
		return err
	}
	if cwd != h.Key.Cwd {
		return errors.New("it runs in another directory")
	}
	env, err := os.ReadFile("/proc/" + p + "/environ")
	if err != nil {
		return err
	}
	var environ []string
	for _, kv := range strings.Split(string(env), "\x00") {
		if kv != "" {
			environ = append(environ, kv)
		}
	}
	if !EnvMatches(environ, h.Key) || !EnvMatches(h.Environ, h.Key) {
		return errors.New("its environment is another")
	}
	return nil
}

// peerIsOwner reports whether the process at the other end of conn is this user's and runs
// this binary: a client sends its environment (credentials included) only to such a process.
func peerIsOwner(conn *os.File) bool {
	raw, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil || int(cred.Uid) != os.Getuid() {
		return false
	}
	theirs, err := fileIdentity("/proc/" + strconv.Itoa(int(cred.Pid)) + "/exe")
	if err != nil {
		return false
	}
	mine, err := fileIdentity("/proc/self/exe")
	return err == nil && theirs == mine
}
