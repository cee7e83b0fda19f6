package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcessOwner names this process on this host ("HOST/PID/START", START its start time in
// clock ticks since boot, so a reused pid does not pass for it). Backends record it on the
// sandboxes of a process that removes them when done (FactoryOptions.Ephemeral), so that
// `gc` can remove them once that process is gone.
func ProcessOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%d", host, os.Getpid(), procStart(os.Getpid()))
}

// OwnerAlive reports whether the process a ProcessOwner string names still runs. known is
// false when it cannot be told from here (another host, or not such a string).
func OwnerAlive(owner string) (alive, known bool) {
	parts := strings.Split(owner, "/")
	if len(parts) != 3 {
		return false, false
	}
	host, _ := os.Hostname()
	if parts[0] != host {
		return false, false
	}
	pid, err1 := strconv.Atoi(parts[1])
	start, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return false, false
	}
	return procStart(pid) == start && start != 0, true
}

// ProcStart is a process's start time in clock ticks since boot (0 if it does not exist).
func ProcStart(pid int) uint64 { return procStart(pid) }

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
