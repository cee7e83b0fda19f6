//go:build unix

package docker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// BenchmarkBranch100MB times, in one run and alternating so that the machine's load falls on
// each alike: a fork of a session whose workspace holds 100 MB (A), a restore of a snapshot
// of it (R), and the same by hand through the Engine API (B): `docker commit` of the
// session's container, then `docker run` of the image with a new volume at /workspace
// (create and start) — which does not carry the workspace's files, since a commit leaves
// volumes out. Each is reported as its median in milliseconds.
//
//	HERMES_SANDBOX_TEST_FULL=1 go test -run '^$' -bench BenchmarkBranch100MB -benchtime 1x ./backends/docker/
func BenchmarkBranch100MB(b *testing.B) {
	be := newBackend(b, func(c *config.Config) { c.Docker.DiskLimit = 0 })
	src := open(b, be, "bench-src")
	res := run(b, src, `i=0; while [ $i -lt 100 ]; do head -c 1048576 /dev/urandom > /workspace/f$i; i=$((i+1)); done; cd /workspace && export B=1; du -sk /workspace`)
	if res.ExitCode != 0 {
		b.Fatalf("filling the workspace: %q", res.Stderr)
	}
	ctx := context.Background()
	snap, err := be.Snapshot(ctx, "bench-src")
	if err != nil {
		b.Fatal(err)
	}
	defer be.RemoveSnapshot(ctx, snap.ID)
	info, err := be.inspect(ctx, be.containerName("bench-src"))
	if err != nil {
		b.Fatal(err)
	}
	const rounds = 5
	var fork, restore, hand []time.Duration
	for i := range rounds {
		name := fmt.Sprintf("bench-fork-%d", i)
		t0 := time.Now()
		if err := be.Fork(ctx, "bench-src", name); err != nil {
			b.Fatal(err)
		}
		fork = append(fork, time.Since(t0))
		if out := run(b, open(b, be, name), "ls /workspace | wc -l; echo $B").Stdout; out != "100\n1\n" {
			b.Fatalf("the fork holds %q; want 100 files and B=1", out)
		}
		be.Remove(ctx, name)

		name = fmt.Sprintf("bench-restore-%d", i)
		t0 = time.Now()
		if err := be.Restore(ctx, snap.ID, name); err != nil {
			b.Fatal(err)
		}
		restore = append(restore, time.Since(t0))
		be.Remove(ctx, name)

		t0 = time.Now()
		id, err := byHand(ctx, be, info.ID, i)
		hand = append(hand, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		cleanHand(ctx, be, id, i)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(testenv.Percentile(fork, 50)), "fork-p50-ms")
	b.ReportMetric(ms(testenv.Percentile(restore, 50)), "restore-p50-ms")
	b.ReportMetric(ms(testenv.Percentile(hand, 50)), "commit+run-p50-ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("fork %v; restore %v; commit+run by hand %v", fork, restore, hand)
}

// byHand is `docker commit` then `docker run` of the image with a new /workspace volume,
// through the Engine API, with the session container's hardening.
func byHand(ctx context.Context, be *Backend, src string, i int) (string, error) {
	ref := fmt.Sprintf("hermes-snapshot-%s:hand-%d", be.scope, i)
	if _, err := be.cli.ContainerCommit(ctx, src, client.ContainerCommitOptions{Reference: ref}); err != nil {
		return "", err
	}
	labels := map[string]string{labelOurs: "1", labelScope: be.scope, labelRole: rolePrep}
	for k, v := range be.extra.Labels {
		labels[k] = v
	}
	resp, err := be.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: ref, Entrypoint: []string{"/bin/sleep", "1000"}, Labels: labels, User: be.cfg.User},
		HostConfig: &container.HostConfig{NetworkMode: "none", ReadonlyRootfs: true, CapDrop: []string{"ALL"},
			SecurityOpt: []string{"no-new-privileges:true"}, LogConfig: container.LogConfig{Type: "none"},
			Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: fmt.Sprintf("hermes-%s-hand-%d-vol", be.scope, i), Target: "/workspace",
				VolumeOptions: &mount.VolumeOptions{Labels: labels}}}},
		Name: fmt.Sprintf("hermes-prep-%s-hand-%d", be.scope, i)})
	if err != nil {
		return "", err
	}
	_, err = be.cli.ContainerStart(ctx, resp.ID, client.ContainerStartOptions{})
	return resp.ID, err
}

func cleanHand(ctx context.Context, be *Backend, id string, i int) {
	be.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	be.cli.VolumeRemove(ctx, fmt.Sprintf("hermes-%s-hand-%d-vol", be.scope, i), client.VolumeRemoveOptions{Force: true})
	be.cli.ImageRemove(ctx, fmt.Sprintf("hermes-snapshot-%s:hand-%d", be.scope, i), client.ImageRemoveOptions{Force: true})
}
