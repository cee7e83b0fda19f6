//go:build !no_docker

package all

import "github.com/hermes-sandbox/hermes-sandbox/backends/docker"

func newDocker(c cfg, o opts) (backend, error) { return docker.New(c.Docker, o) }
