//go:build no_kubernetes

package all

func newKubernetes(cfg, opts) (backend, error) { return leftOut("kubernetes") }
