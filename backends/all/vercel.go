//go:build !no_vercel

package all

import "github.com/hermes-sandbox/hermes-sandbox/backends/vercel"

func newVercel(c cfg, o opts) (backend, error) { return vercel.New(c.Vercel, o) }
