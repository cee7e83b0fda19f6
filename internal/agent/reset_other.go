//go:build !linux || !(amd64 || arm64)

package agent

import (
	"errors"
	"time"
)

// A reset is for a helper in a Linux (amd64, arm64) container of a warm pool (reset_linux.go).

func inPoolContainer() error { return errors.New("a reset needs a Linux container") }

func refuseTracing() error { return errors.New("not on Linux") }

// RefuseTracing is refuseTracing for the idle entrypoint; elsewhere it does nothing.
func RefuseTracing() error { return nil }

func otherProcesses() []int { return nil }

func killOthers(time.Time) []int { return nil }

func listIPC() []string { return nil }

func removeIPC() []string { return nil }

func fingerprint([]string, func(string)) []string { return nil }
