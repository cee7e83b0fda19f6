package testenv

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/internal/loopdisk"
)

var engine struct {
	sync.Once
	cli *client.Client
	err error
}

// DockerEngine returns a client of the Docker engine (DOCKER_HOST or the local socket), or
// skips the test (fails it with HERMES_SANDBOX_TEST_REQUIRE=docker) when none answers; why
// says what the test needs it for. Tests that need the engine are in the full tier: without
// HERMES_SANDBOX_TEST_FULL=1 (or docker in HERMES_SANDBOX_TEST_REQUIRE) they skip (NeedFull).
func DockerEngine(t testing.TB, why string) *client.Client {
	t.Helper()
	NeedFull(t, "docker", "the test runs against a Docker engine")
	engine.Do(func() {
		engine.cli, engine.err = client.New(client.FromEnv)
		if engine.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, engine.err = engine.cli.Ping(ctx, client.PingOptions{})
	})
	if engine.err != nil {
		Missing(t, "docker", why+"no Docker engine answers: "+engine.err.Error())
	}
	return engine.cli
}

// RemoveContainers force-removes every container carrying label (key=value) and returns their
// names, for a TestMain that fails when tests leave containers behind.
func RemoveContainers(cli *client.Client, label string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", label)})
	if err != nil {
		return nil
	}
	var names []string
	for _, c := range list.Items {
		names = append(names, "container "+strings.Join(c.Names, ","))
		cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	}
	return names
}

// Docker is DockerEngine without a reason to add.
func Docker(t testing.TB) *client.Client {
	t.Helper()
	return DockerEngine(t, "")
}

// dropDisk deletes the bounded file system (docker.disk_limit) of the volume vol, which the
// caller has just removed through the engine: the engine's removal leaves its loop device
// attached and its image on the host, and no later gc knows the test's state directory.
// Without root (or without such a disk) there is nothing to do.
func dropDisk(vol string) {
	if d := loopdisk.At(loopdisk.HostRoot, vol); d.Exists() {
		d.Remove()
	}
}

// RemoveLabelled force-removes the containers and volumes labelled label=value (and the
// volumes' bounded file systems) and returns their names ("" when there were none, or no engine answers). A TestMain calls it after
// the tests to find and clean what they left behind.
func RemoveLabelled(label, value string) string {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return ""
	}
	defer cli.Close()
	names := RemoveContainers(cli, label+"="+value)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", label+"="+value)}); err == nil {
		for _, v := range vols.Items {
			names = append(names, "volume "+v.Name)
			if _, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err == nil {
				dropDisk(v.Name)
			}
		}
	}
	return strings.Join(names, ", ")
}

// Percentile returns the p-th percentile of ds.
func Percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// ReportLatency adds the p50 and p95 of ds, in milliseconds, to a benchmark's output.
func ReportLatency(b *testing.B, ds []time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(Percentile(ds, 50)), "p50-ms")
	b.ReportMetric(ms(Percentile(ds, 95)), "p95-ms")
	b.ReportMetric(0, "ns/op")
}
