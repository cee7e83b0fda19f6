//go:build unix

package docker

import (
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// sessionContainer returns the ID of the session's container.
func sessionContainer(t *testing.T, b *Backend, session string) string {
	t.Helper()
	info, err := b.inspect(ctxT(t, 10*time.Second), b.containerName(session))
	if err != nil {
		t.Fatalf("inspect the container of %s: %v", session, err)
	}
	return info.ID
}

// jobRunning reports whether the session's job id is listed as running.
func jobRunning(t *testing.T, sess sandbox.Session, id string) bool {
	t.Helper()
	jobs, err := sess.(sandbox.JobRunner).Jobs(ctxT(t, 30*time.Second))
	if err != nil {
		t.Fatalf("Jobs() = %v", err)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j.Running
		}
	}
	return false
}

// TestSettingsChangeKeepsLiveSession is issue #36 item 2: a one-call override (memory
// limit), an image re-imported under a new id and a missing image never replace a live
// session's container; the session says which settings it does not use, and only Recreate
// (exec --recreate) moves it to the current settings, creating the new container first.
func TestSettingsChangeKeepsLiveSession(t *testing.T) {
	state := t.TempDir()
	base := testImage(t)
	cli := needEngine(t)
	// A tag of the test's own, so that re-tagging it touches no other test.
	tag := "hermes-sandbox-test/retag:" + sandbox.RandomHex(4)
	if _, err := cli.ImageTag(ctxT(t, 30*time.Second), client.ImageTagOptions{Source: base, Target: tag}); err != nil {
		t.Fatalf("tag the test image: %v", err)
	}
	t.Cleanup(func() {
		cli.ImageRemove(ctxT(t, 30*time.Second), tag, client.ImageRemoveOptions{Force: true})
	})
	with := func(mut func(*config.Config)) *Backend {
		return newBackendWith(t, state, func(c *config.Config) {
			c.Docker.Image = tag
			c.Docker.PidsLimit = 100
			if mut != nil {
				mut(c)
			}
		})
	}
	b := with(nil)
	s := open(t, b, "hyp")
	run(t, s, "echo w > /workspace/w; cd /tmp; export X=kept")
	job, err := s.(sandbox.JobRunner).StartJob(ctxT(t, 30*time.Second), sandbox.Command{Script: "sleep 6001"})
	if err != nil {
		t.Fatalf("StartJob() = %v", err)
	}
	if !jobRunning(t, s, job.ID) {
		t.Fatalf("job %s is not running right after its start", job.ID)
	}
	first := sessionContainer(t, b, "hyp")

	// A one-call override of the memory limit: the same container, its job and shell state.
	b2 := with(func(c *config.Config) { c.Docker.MemoryLimit = 600 * config.Mebibyte })
	s2 := open(t, b2, "hyp")
	res := run(t, s2, "pwd; echo $X; cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null")
	if res.Stdout != "/tmp\nkept\n100\n" || res.EnvironmentRecreated {
		t.Errorf("after a memory_limit override: %q recreated %v; want /tmp, kept, pids.max 100, not recreated", res.Stdout, res.EnvironmentRecreated)
	}
	if !strings.Contains(res.Stderr, "docker.memory_limit") || strings.Contains(res.Stderr, "docker.pids_limit") ||
		!strings.Contains(res.Stderr, "--recreate") {
		t.Errorf("stderr = %q; want a note naming docker.memory_limit (alone) and --recreate", res.Stderr)
	}
	if !jobRunning(t, s2, job.ID) || sessionContainer(t, b, "hyp") != first {
		t.Errorf("the memory_limit override replaced the container or ended job %s", job.ID)
	}

	// The tag moves to an image with another id (a re-import): nothing changes.
	if _, err := cli.ContainerCommit(ctxT(t, time.Minute), first, client.ContainerCommitOptions{Reference: tag}); err != nil {
		t.Fatalf("commit a new image under %s: %v", tag, err)
	}
	b3 := with(nil)
	res = run(t, open(t, b3, "hyp"), "echo $X")
	if res.Stdout != "kept\n" || res.EnvironmentRecreated || strings.Contains(res.Stderr, "keeps its running sandbox") {
		t.Errorf("after a re-tag: %q, stderr %q, recreated %v; want kept, no note", res.Stdout, res.Stderr, res.EnvironmentRecreated)
	}

	// A missing image: the command runs in the kept container and says docker.image is not
	// used; recreating fails with the image's error and leaves the container as it was.
	missing := "hermes-sandbox-test/missing:" + sandbox.RandomHex(4)
	b4 := with(func(c *config.Config) { c.Docker.Image = missing })
	res = run(t, open(t, b4, "hyp"), "echo $X")
	if res.Stdout != "kept\n" || !strings.Contains(res.Stderr, "docker.image") {
		t.Errorf("with a missing image: %q, stderr %q; want kept and a note naming docker.image", res.Stdout, res.Stderr)
	}
	err = b4.Recreate(ctxT(t, time.Minute), "hyp")
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Recreate() with a missing image = %v; want an error naming the image", err)
	}
	if sessionContainer(t, b, "hyp") != first || !jobRunning(t, s, job.ID) {
		t.Errorf("a failed Recreate replaced the container or ended job %s", job.ID)
	}
	if names := containerNames(t, b); len(names) != 1 {
		t.Errorf("containers after a failed Recreate = %q; want the session's one", names)
	}

	// Recreate with the current settings: a new container (pids 256 by default), the
	// workspace kept, the old container gone, and the next command says recreated.
	b5 := with(func(c *config.Config) { c.Docker.PidsLimit = 256 })
	if err := b5.Recreate(ctxT(t, 2*time.Minute), "hyp"); err != nil {
		t.Fatalf("Recreate() = %v", err)
	}
	if sessionContainer(t, b5, "hyp") == first {
		t.Fatal("Recreate() kept the old container")
	}
	res = run(t, open(t, b5, "hyp"), "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null; cat /workspace/w")
	if res.Stdout != "256\nw\n" || !res.EnvironmentRecreated || strings.Contains(res.Stderr, "keeps its running sandbox") {
		t.Errorf("after Recreate: %q, stderr %q, recreated %v; want 256, the workspace, recreated, no note", res.Stdout, res.Stderr, res.EnvironmentRecreated)
	}
	if names := containerNames(t, b5); len(names) != 1 {
		t.Errorf("containers after Recreate = %q; want one", names)
	}
}

// TestPassthroughFollowsCaller is issue #36 item 6: a terminal.env_passthrough variable
// takes the caller's current value at each call, not the one the session first saw.
func TestPassthroughFollowsCaller(t *testing.T) {
	state := t.TempDir()
	img := testImage(t)
	with := func(token string) *Backend {
		cfg := config.NewConfig()
		cfg.Docker.Image = img
		cfg.Terminal.EnvPassthrough = []string{"HERMES_TEST_TOKEN"}
		b, err := NewWith(cfg.Docker, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state,
			Environ: append(testEnviron(), "HERMES_TEST_TOKEN="+token)}), Options{Labels: map[string]string{testLabel: testRun}})
		if err != nil {
			t.Fatalf("NewWith() = %v", err)
		}
		t.Cleanup(func() {
			b.Close()
			cleanScope(t, b)
		})
		return b
	}
	if res := run(t, open(t, with("one"), "rot"), "echo $HERMES_TEST_TOKEN; export Y=1"); res.Stdout != "one\n" {
		t.Fatalf("first call sees %q; want one", res.Stdout)
	}
	if res := run(t, open(t, with("two"), "rot"), "echo $HERMES_TEST_TOKEN $Y"); res.Stdout != "two 1\n" {
		t.Errorf("after the caller rotated the value, the session sees %q; want two 1", res.Stdout)
	}
}
