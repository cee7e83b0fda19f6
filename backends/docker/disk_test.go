package docker

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/loopdisk"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// TestDiskLimit: a write past docker.disk_limit fails inside the sandbox with "No space left
// on device", and the host's disk grows by at most the limit. The workspace outlives a stop
// of its container and of its mount (as after a reboot), and goes with its session.
func TestDiskLimit(t *testing.T) {
	const limit = 32 * config.Mebibyte
	b := newBackend(t, func(c *config.Config) { c.Docker.DiskLimit = limit })
	if err := b.diskUnenforced(); err != nil {
		testenv.Missing(t, "loopdisk", "docker.disk_limit cannot be enforced here: "+err.Error())
	}
	sess := open(t, b, "full")
	res := run(t, sess, "echo kept > /workspace/small; dd if=/dev/zero of=/workspace/big bs=1M count=64; echo rc=$?")
	if !strings.Contains(res.Stderr, "No space left on device") || strings.Contains(res.Stdout, "rc=0") {
		t.Fatalf("writing 64 MiB into a %s workspace: stdout %q, stderr %q; want ENOSPC", config.Size(limit), res.Stdout, res.Stderr)
	}
	vol := b.containerName("full") + "-ws"
	disk := loopdisk.At(diskRoot, vol)
	var st syscall.Stat_t
	if err := syscall.Stat(disk.Image, &st); err != nil {
		t.Fatalf("the workspace's image: %v", err)
	}
	if used := st.Blocks * 512; used > int64(limit) {
		t.Errorf("the workspace takes %d bytes on the host; want at most %d", used, int64(limit))
	}

	// Stopped, and its file system unmounted, as a reboot leaves it: the next command
	// mounts it again, and the data is there.
	ctx := ctxT(t, time.Minute)
	helper := helperOf(t, sess)
	if _, err := b.cli.ContainerKill(ctx, b.containerName("full"), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	waitLost(t, helper)
	if err := unmountWhenFree(t, disk.Mount); err != nil {
		t.Fatal(err)
	}
	if res := run(t, sess, "cat /workspace/small"); res.Stdout != "kept\n" {
		t.Errorf("after a stop and an unmount: %q, stderr %q; want the workspace kept", res.Stdout, res.Stderr)
	}

	if err := b.Remove(ctx, "full"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{disk.Image, disk.Mount} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the session was removed: %v; want it gone", p, err)
		}
	}
}

// unmountWhenFree unmounts dir once the engine has let go of it (its bind of the volume ends
// with the container).
func unmountWhenFree(t *testing.T, dir string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := syscall.Unmount(dir, 0)
		if err == nil || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDiskLimitWarnings: an unlimited workspace is named among the weakened defaults.
func TestDiskLimitWarnings(t *testing.T) {
	b := newBackend(t, func(c *config.Config) { c.Docker.DiskLimit = 0 })
	if w := strings.Join(b.Warnings(), "\n"); !strings.Contains(w, "docker.disk_limit is 0") {
		t.Errorf("Warnings() = %q; want docker.disk_limit", w)
	}
}
