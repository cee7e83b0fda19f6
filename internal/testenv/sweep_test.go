package testenv

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/internal/loopdisk"
)

// The volumes of a dead test process are swept; those of a live one, and a value without a
// pid, are kept.
func TestSweepDead(t *testing.T) {
	cli := Docker(t)
	label := "hermes-sandbox.test.sweep-" + strconv.Itoa(os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	values := map[string]bool{ // value → swept
		"999999999-1":                                  true,
		"k8s-999999998-2":                              true,
		strconv.Itoa(os.Getpid()) + "-3":               false,
		"daytona-" + strconv.Itoa(os.Getppid()) + "-4": false,
		"no-pid-here":                                  false,
	}
	names := map[string]string{}
	for v := range values {
		vol, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Labels: map[string]string{label: v}})
		if err != nil {
			t.Fatal(err)
		}
		names[v] = vol.Volume.Name
		t.Cleanup(func() {
			cli.VolumeRemove(context.Background(), vol.Volume.Name, client.VolumeRemoveOptions{Force: true})
		})
	}
	removed := SweepDead(label)
	for v, swept := range values {
		if got := slices.Contains(removed, "volume "+names[v]); got != swept {
			t.Errorf("SweepDead removed the volume labelled %q: %v; want %v (removed %v)", v, got, swept, removed)
		}
	}
}

func TestDeadOwner(t *testing.T) {
	for v, want := range map[string]bool{
		"999999999-12": true, "k8s-999999999-1": true, strconv.Itoa(os.Getpid()) + "-1": false, "x": false, "": false,
	} {
		if got := deadOwner(v); got != want {
			t.Errorf("deadOwner(%q) = %v; want %v", v, got, want)
		}
	}
}

// Sweeping a dead process's volume also deletes its bounded file system (docker.disk_limit):
// the engine's removal leaves the loop device attached and the image on the host, and the
// dead test's state directory, which gc would need to find it, is gone. A live process's disk
// is kept.
func TestSweepDeadDropsDisks(t *testing.T) {
	cli := Docker(t)
	if err := loopdisk.Supported(); err != nil {
		Missing(t, "loopdisk", "bounded workspaces: "+err.Error())
	}
	label := "hermes-sandbox.test.sweepdisk-" + strconv.Itoa(os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	disks := map[string]loopdisk.Disk{}
	for _, v := range []string{"999999997-1", strconv.Itoa(os.Getpid()) + "-2"} {
		vol, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Labels: map[string]string{label: v}})
		if err != nil {
			t.Fatal(err)
		}
		d := loopdisk.At(loopdisk.HostRoot, vol.Volume.Name)
		t.Cleanup(func() {
			cli.VolumeRemove(context.Background(), vol.Volume.Name, client.VolumeRemoveOptions{Force: true})
			d.Remove()
		})
		if err := d.Ensure(ctx, 64<<20, 0, 0); err != nil {
			t.Fatal(err)
		}
		disks[v] = d
	}
	SweepDead(label)
	if d := disks["999999997-1"]; d.Exists() || d.Mounted() {
		t.Errorf("the dead process's disk %s is still there (exists %v, mounted %v)", d.Image, d.Exists(), d.Mounted())
	}
	if d := disks[strconv.Itoa(os.Getpid())+"-2"]; !d.Exists() || !d.Mounted() {
		t.Errorf("the live process's disk %s was touched (exists %v, mounted %v)", d.Image, d.Exists(), d.Mounted())
	}
}
