//go:build !no_singularity && !linux

package all

import "runtime"

func newSingularity(cfg, opts) (backend, error) { return nil, linuxOnly("singularity", runtime.GOOS) }
