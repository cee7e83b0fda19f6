//go:build !no_singularity && linux

package all

import "github.com/hermes-sandbox/hermes-sandbox/backends/singularity"

func newSingularity(c cfg, o opts) (backend, error) { return singularity.New(c.Singularity, o) }
