//go:build unix && !linux

package agent

import (
	"fmt"
	"runtime"
)

// LandlockABI reports that Landlock is Linux-only.
func LandlockABI() (int, error) {
	return 0, fmt.Errorf("Landlock is Linux-only (this is %s)", runtime.GOOS)
}

type confiner struct{ status ConfinementStatus }

func newConfiner(c Confinement, scratch []string) (*confiner, error) {
	_, err := LandlockABI()
	return nil, err
}

func (cf *confiner) start(fn func()) { fn() }

func (cf *confiner) close() {}
