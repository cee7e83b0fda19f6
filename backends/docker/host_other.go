//go:build !windows

package docker

// defaultHost is the engine with no docker.host, DOCKER_HOST or context.
const defaultHost = "unix:///var/run/docker.sock"
