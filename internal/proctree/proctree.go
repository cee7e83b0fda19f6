//go:build unix

// Package proctree finds and kills a process's whole tree on Linux through /proc, including
// descendants that moved to a process group of their own. On macOS, which has no /proc,
// Descendants finds none and Kill reaches the process group alone.
package proctree

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Kill stops, then kills, pid's process group and every descendant of pid, including
// those that moved to a process group of their own. Stopping first keeps the tree from
// forking away while it is being collected.
func Kill(pid int) {
	seen := map[int]bool{}
	for round := 0; round < 50; round++ {
		_ = unix.Kill(-pid, unix.SIGSTOP)
		fresh := 0
		for _, p := range Descendants(pid) {
			if !seen[p] {
				seen[p] = true
				fresh++
				_ = unix.Kill(p, unix.SIGSTOP)
			}
		}
		if fresh == 0 {
			break
		}
	}
	_ = unix.Kill(-pid, unix.SIGKILL)
	_ = unix.Kill(pid, unix.SIGKILL)
	for p := range seen {
		_ = unix.Kill(p, unix.SIGKILL)
	}
}

// Descendants lists the live descendants of pid from /proc.
func Descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		var p int
		if _, err := fmt.Sscanf(e.Name(), "%d", &p); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may contain spaces and parentheses: parse after the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		var state byte
		var ppid int
		if _, err := fmt.Sscanf(string(b[i+1:]), " %c %d", &state, &ppid); err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
