//go:build !no_daytona

package all

import "github.com/hermes-sandbox/hermes-sandbox/backends/daytona"

func newDaytona(c cfg, o opts) (backend, error) { return daytona.New(c.Daytona, o) }
