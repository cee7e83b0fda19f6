package testenv

import "os"

// processGone reports whether no process pid exists: on Windows, opening it fails.
func processGone(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	p.Release()
	return false
}
