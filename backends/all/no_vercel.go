//go:build no_vercel

package all

func newVercel(cfg, opts) (backend, error) { return leftOut("vercel") }
