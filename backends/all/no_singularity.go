//go:build no_singularity

package all

func newSingularity(cfg, opts) (backend, error) { return leftOut("singularity") }
