package testenv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// SweepDead force-removes the containers and volumes (with their bounded file systems, see
// dropDisk) that test processes which are no longer alive left under label (their value
// names the process: "<pid>-…" or "<name>-<pid>-…"), so a run killed by a timeout does not
// leave them for good. A TestMain calls it before m.Run;
// the objects of running test processes are kept. It returns what it removed.
func SweepDead(label string) []string {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var removed []string
	if list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", label)}); err == nil {
		for _, c := range list.Items {
			if deadOwner(c.Labels[label]) {
				if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err == nil {
					removed = append(removed, "container "+strings.Join(c.Names, ","))
				}
			}
		}
	}
	if vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", label)}); err == nil {
		for _, v := range vols.Items {
			if deadOwner(v.Labels[label]) {
				if _, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err == nil {
					dropDisk(v.Name)
					removed = append(removed, "volume "+v.Name)
				}
			}
		}
	}
	return removed
}

// deadOwner reports whether value names a test process (its first all-digit part is the
// pid) that no longer runs. A value without a pid, or whose process runs, is not dead.
func deadOwner(value string) bool {
	for _, part := range strings.Split(value, "-") {
		pid, err := strconv.Atoi(part)
		if err != nil || pid <= 0 {
			continue
		}
		return processGone(pid)
	}
	return false
}

// ReportSwept runs SweepDead and says on stderr what it removed.
func ReportSwept(label string) {
	if removed := SweepDead(label); len(removed) > 0 {
		fmt.Fprintf(os.Stderr, "testenv: removed what dead test processes left behind: %s\n", strings.Join(removed, ", "))
	}
}
