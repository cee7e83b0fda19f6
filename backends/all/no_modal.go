//go:build no_modal

package all

func newModal(cfg, opts) (backend, error) { return leftOut("modal") }
