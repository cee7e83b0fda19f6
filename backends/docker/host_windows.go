package docker

// defaultHost is the engine with no docker.host, DOCKER_HOST or context: Docker Desktop's
// named pipe.
const defaultHost = "npipe:////./pipe/docker_engine"
