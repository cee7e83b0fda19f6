//go:build no_daytona

package all

func newDaytona(cfg, opts) (backend, error) { return leftOut("daytona") }
