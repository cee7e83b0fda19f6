package proctree

import "os"

// Kill kills pid. Windows has neither process groups to signal nor /proc to walk; the
// helper whose commands this kills runs only in Linux sandboxes, and local sessions are
// refused on Windows, so nothing on Windows starts a tree to kill.
func Kill(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
		p.Release()
	}
}

// Descendants finds none on Windows (see Kill).
func Descendants(pid int) []int { return nil }
