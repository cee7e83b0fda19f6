package testenv

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
)

var engine struct {
	sync.Once
	cli *client.Client
	err error
}

// Docker returns a client of the Docker engine the environment names (DOCKER_HOST, else the
// local socket), pinged once per process. Without an engine the test skips, or fails when
// HERMES_SANDBOX_TEST_REQUIRE names docker.
func Docker(t testing.TB) *client.Client {
	t.Helper()
	engine.Do(func() {
		engine.cli, engine.err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if engine.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, engine.err = engine.cli.Ping(ctx)
	})
	if engine.err != nil {
		Missing(t, "docker", "no Docker engine answers: "+engine.err.Error())
	}
	return engine.cli
}

// RemoveLabelled force-removes the containers and volumes labelled label=value and returns
// their names ("" when there were none, or no engine answers). A TestMain calls it after
// the tests to find and clean what they left behind.
func RemoveLabelled(label, value string) string {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return ""
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", label+"="+value))
	var names []string
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return ""
	}
	for _, c := range list {
		names = append(names, "container "+strings.Join(c.Names, ","))
		cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
	vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err == nil {
		for _, v := range vols.Volumes {
			names = append(names, "volume "+v.Name)
			cli.VolumeRemove(ctx, v.Name, true)
		}
	}
	return strings.Join(names, ", ")
}
