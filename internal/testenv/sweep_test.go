package testenv

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/client"
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
