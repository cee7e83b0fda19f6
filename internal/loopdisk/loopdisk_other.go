//go:build !linux

package loopdisk

import (
	"context"
	"errors"
	"time"
)

// Supported says why not.
func Supported() error { return errors.New("bounded directories need Linux (loop devices)") }

// Mounted is false: there are no disks here.
func (d Disk) Mounted() bool { return false }

// Ensure refuses.
func (d Disk) Ensure(context.Context, int64, int, int) error { return Supported() }

// Remove has nothing to remove.
func (d Disk) Remove() error { return nil }

// SweepLocks has nothing to sweep.
func SweepLocks(string, time.Duration) {}

// SeenBySocketPeer has no disks to be seen.
func SeenBySocketPeer(string, string) error { return nil }
