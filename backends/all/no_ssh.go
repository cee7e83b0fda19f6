//go:build no_ssh

package all

func newSSH(cfg, opts) (backend, error) { return leftOut("ssh") }
