//go:build no_docker

package all

func newDocker(cfg, opts) (backend, error) { return leftOut("docker") }
