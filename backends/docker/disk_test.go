//go:build unix

package docker

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/loopdisk"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
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

// inPrivateNS marks the run of TestDiskLimitInPrivateMountNamespace inside the namespace.
const inPrivateNS = "HERMES_SANDBOX_TEST_IN_PRIVATE_MOUNT_NS"

// TestDiskLimitInPrivateMountNamespace: run in a mount namespace of its own (as a systemd
// unit with PrivateMounts= runs it; here `unshare -m --propagation private`), the backend
// cannot hand the engine a bounded workspace: it says why and what to change, and leaves no
// loop device, disk image or volume behind. The test runs itself again under unshare.
func TestDiskLimitInPrivateMountNamespace(t *testing.T) {
	if os.Getenv(inPrivateNS) == "1" {
		diskLimitInPrivateNS(t)
		return
	}
	b := newBackend(t, func(c *config.Config) { c.Docker.DiskLimit = 32 * config.Mebibyte })
	if err := b.diskUnenforced(); err != nil {
		testenv.Missing(t, "loopdisk", "docker.disk_limit cannot be enforced here: "+err.Error())
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare (util-linux) to make a private mount namespace")
	}
	if out, err := exec.Command(unshare, "-m", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Skipf("needs a private mount namespace: unshare -m: %v: %s", err, out)
	}
	before := loopBackingFiles(t)
	cmd := exec.Command(unshare, "-m", "--propagation", "private", os.Args[0],
		"-test.run=^TestDiskLimitInPrivateMountNamespace$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), inPrivateNS+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("the test in a private mount namespace: %v\n%s", err, out)
	}
	// Other test processes may attach disks meanwhile: only the child's scope counts.
	_, scope, _ := strings.Cut(string(out), scopeMark)
	scope, _, _ = strings.Cut(scope, "\n")
	if scope == "" {
		t.Fatalf("the test in a private mount namespace did not name its scope:\n%s", out)
	}
	for dev, file := range loopBackingFiles(t) {
		if strings.HasPrefix(file, filepath.Join(diskRoot, "hermes-"+scope+"-")) && before[dev] != file {
			t.Errorf("loop device %s is left attached to %s", dev, file)
		}
	}
}

// scopeMark precedes, in the output of the run inside the namespace, the scope of its backend.
const scopeMark = "private namespace scope: "

// diskLimitInPrivateNS is TestDiskLimitInPrivateMountNamespace inside the namespace.
func diskLimitInPrivateNS(t *testing.T) {
	b := newBackend(t, func(c *config.Config) { c.Docker.DiskLimit = 32 * config.Mebibyte })
	t.Log(scopeMark + b.scope)
	ctx := ctxT(t, 2*time.Minute)
	const why = "PrivateMounts="
	if err := b.Check(ctx); err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("Check() in a private mount namespace = %v; want an error naming %s", err, why)
	}
	sess := open(t, b, "privns")
	res, err := sess.Exec(ctx, sandbox.Command{Script: "echo ran"})
	if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "docker.disk_limit: 0") {
		t.Errorf("Exec in a private mount namespace = %+v, %v; want an error naming %s and docker.disk_limit: 0", res, err, why)
	}
	vol := b.containerName("privns") + "-ws"
	disk := loopdisk.At(diskRoot, vol)
	for dev, file := range loopBackingFiles(t) {
		if file == disk.Image {
			t.Errorf("loop device %s is left attached to %s", dev, file)
		}
	}
	if _, err := os.Stat(disk.Image); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the workspace's disk image %s: %v; want none", disk.Image, err)
	}
	if _, err := b.cli.VolumeInspect(ctx, vol, client.VolumeInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the workspace volume %s: %v; want none", vol, err)
	}
}

// loopBackingFiles maps each attached loop device to its backing file.
func loopBackingFiles(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil {
			out[strings.Split(f, "/")[3]] = strings.TrimSuffix(strings.TrimSpace(string(data)), " (deleted)")
		}
	}
	return out
}
