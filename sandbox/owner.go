package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcessOwner names this process on this machine ("HOST/BOOT/PID/START": BOOT identifies
// this boot of the machine, START is the process's start time in clock ticks since boot, so
// neither a reused pid nor a reboot passes for it). Backends record it on the sandboxes of a
// process that removes them when done (FactoryOptions.Ephemeral), so that `gc` can remove
// them once that process is gone.
func ProcessOwner() string { return OwnerOf(os.Getpid()) }

// OwnerOf is ProcessOwner for process pid of this machine.
func OwnerOf(pid int) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%s/%d/%d", host, bootID(), pid, procStart(pid))
}

// bootID is a short form of the kernel's id for this boot ("" if unknown).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	id := strings.ReplaceAll(strings.TrimSpace(string(b)), "-", "")
	return id[:min(len(id), 12)]
}

// OwnerAlive reports whether the process a ProcessOwner string names still runs. known is
// false when that cannot be told from here: another host, another boot (or another machine
// with the same host name), a start time of 0, or not such a string. Callers treat an
// unknown owner as alive, so nothing is removed on a guess.
func OwnerAlive(owner string) (alive, known bool) {
	parts := strings.Split(owner, "/")
	if len(parts) != 4 {
		return false, false
	}
	host, _ := os.Hostname()
	boot := bootID()
	if parts[0] != host || boot == "" || parts[1] != boot {
		return false, false
	}
	pid, err1 := strconv.Atoi(parts[2])
	start, err2 := strconv.ParseUint(parts[3], 10, 64)
	if err1 != nil || err2 != nil || start == 0 {
		return false, false
	}
	return procStart(pid) == start, true
}

// procStart is a process's start time in clock ticks since boot (0 if it does not exist).
func procStart(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

// OwnerRecorder is implemented by backends that record ProcessOwner on the sandboxes of an
// Ephemeral process (and of their warm pools), so a Collect with GCOptions.OwnerGoneOnly finds
// what a process that is gone left behind. Others have nothing for that sweep to find.
type OwnerRecorder interface {
	RecordsOwners() bool
}
