//go:build unix

package docker

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/loopdisk"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// containerNames lists the names of b's containers.
func containerNames(t *testing.T, b *Backend) []string {
	t.Helper()
	list, err := b.ours(ctxT(t, 30*time.Second), false)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range list {
		out = append(out, containerName(c))
	}
	slices.Sort(out)
	return out
}

func poolNames(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "hermes-pool-") {
			out = append(out, n)
		}
	}
	return out
}

func TestWarmPool(t *testing.T) {
	b := newBackend(t, func(c *config.Config) { c.Docker.PoolSize = 2 })
	if err := b.Prewarm(ctxT(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n := len(poolNames(containerNames(t, b))); n != 2 {
		t.Fatalf("pool holds %d containers; want 2", n)
	}
	start := time.Now()
	sess := open(t, b, "pooled")
	res := run(t, sess, "pwd; id -u; stat -c %u /workspace; touch /workspace/x && echo ok")
	first := time.Since(start)
	t.Logf("first command from the warm pool: %v", first)
	if res.Stdout != "/workspace\n1000\n1000\nok\n" || res.EnvironmentRecreated {
		t.Errorf("pooled session = %q recreated %v", res.Stdout, res.EnvironmentRecreated)
	}
	info, err := b.inspect(ctxT(t, 10*time.Second), b.containerName("pooled"))
	if err != nil {
		t.Fatalf("the claimed container is not named after the session: %v", err)
	}
	if !strings.HasPrefix(info.Config.Labels[labelPool], "") || info.HostConfig.NetworkMode != "none" || !info.HostConfig.ReadonlyRootfs {
		t.Errorf("pooled container is not hardened: %+v", info.HostConfig)
	}
	// The pool refills in the background.
	if err := b.Prewarm(ctxT(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The session is found again by a new process, and listed.
	b2 := newBackendWith(t, b.opts.StateDir, func(c *config.Config) { c.Docker = b.cfg; c.Docker.PoolSize = 0 })
	if res := run(t, open(t, b2, "pooled"), "ls /workspace/x"); res.ExitCode != 0 || res.EnvironmentRecreated {
		t.Errorf("second process: %+v", res)
	}
	list, err := b.Sessions(ctxT(t, 10*time.Second))
	if err != nil || len(list) != 1 || list[0].Name != "pooled" {
		t.Errorf("Sessions() = %+v, %v; want just pooled", list, err)
	}
	// A claim for a name that exists fails without losing the pool container.
	p := b.getPool()
	if e := p.claim(ctxT(t, 10*time.Second), b.containerName("pooled")); e != nil {
		t.Errorf("claim of a taken name returned %s", e.name)
	}
	if err := b.Prewarm(ctxT(t, 10*time.Second)); err != nil {
		t.Errorf("pool after a failed claim: %v", err)
	}
	// Close removes the unclaimed containers and keeps the session's.
	b.Close()
	names := containerNames(t, b)
	if len(poolNames(names)) != 0 || !slices.Contains(names, b.containerName("pooled")) {
		t.Errorf("after Close: %v; want no pool containers and the session kept", names)
	}
	if _, err := b.Open(ctxT(t, time.Second), "x"); err == nil {
		t.Errorf("Open after Close succeeded")
	}
}

func TestPoolContainerRemovedBehindOurBack(t *testing.T) {
	b := newBackend(t, func(c *config.Config) { c.Docker.PoolSize = 1 })
	if err := b.Prewarm(ctxT(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, n := range poolNames(containerNames(t, b)) {
		b.cli.ContainerRemove(ctxT(t, 30*time.Second), n, client.ContainerRemoveOptions{Force: true})
	}
	sess := open(t, b, "afterloss")
	if res := run(t, sess, "echo ok"); res.Stdout != "ok\n" {
		t.Errorf("session after the pool container vanished = %+v", res)
	}
}

func TestGC(t *testing.T) {
	b := newBackend(t, func(c *config.Config) { c.Docker.IdleTimeout = time.Second })
	ctx := ctxT(t, 2*time.Minute)
	idle := open(t, b, "idle")
	run(t, idle, "cd /tmp; echo data > /workspace/d")
	busy := open(t, b, "busy")
	run(t, busy, "true")
	idle.Close() // its helper detaches; busy keeps one attached
	// An orphan volume and a dead process's pool leftover.
	orphan := "hermes-" + b.scope + "-orphan-ws"
	if _, err := b.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: orphan, Labels: map[string]string{labelOurs: "1", labelScope: b.scope, testLabel: testRun}}); err != nil {
		t.Fatal(err)
	}
	// A bounded workspace whose volume is gone (a removal cut short between the two).
	lostDisk := loopdisk.At(diskRoot, "hermes-"+b.scope+"-lost-ws")
	bounded := b.diskUnenforced() == nil
	if bounded {
		if err := lostDisk.Ensure(ctx, int64(config.MinDockerDisk), 1000, 1000); err != nil {
			t.Fatal(err)
		}
		// Old enough not to be a session being created.
		old := time.Now().Add(-2 * orphanAge)
		if err := os.Chtimes(lostDisk.Image, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	spec, err := b.spec("hermes-pool-"+b.scope+"-dead", rolePool, "", userIDs{uid: 1000, gid: 1000})
	if err != nil {
		t.Fatal(err)
	}
	spec.config.Labels[labelPool] = testenv.GoneOwner(t)
	if _, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: spec.config, HostConfig: spec.host, Name: "hermes-pool-" + b.scope + "-dead"}); err != nil {
		t.Fatal(err)
	}
	// Poll until the idle session has been idle longer than its 1 s timeout.
	var dry sandbox.GCReport
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if dry, err = b.Collect(ctx, sandbox.GCOptions{DryRun: true}); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(dry.Removed, func(it sandbox.GCItem) bool { return it.Name == b.containerName("idle") }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle session never became collectable: %+v", dry)
		}
	}
	if c, _ := scopeObjects(t, b); c != 3 {
		t.Errorf("dry run removed something: %d containers left", c)
	}
	rep, err := b.Collect(ctx, sandbox.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var removed []string
	for _, it := range rep.Removed {
		removed = append(removed, it.Kind+" "+it.Name)
	}
	slices.Sort(removed)
	want := []string{
		"container " + b.containerName("idle"),
		"container hermes-pool-" + b.scope + "-dead",
		"volume " + b.containerName("idle") + "-ws",
		"volume hermes-pool-" + b.scope + "-dead-ws",
		"volume " + orphan,
	}
	if bounded {
		want = append(want, "disk hermes-"+b.scope+"-lost-ws")
	}
	slices.Sort(want)
	for _, w := range want {
		if !slices.Contains(removed, w) {
			t.Errorf("GC removed %q; want it to include %q (kept %+v)", removed, w, rep.Kept)
		}
	}
	if len(dry.Removed) < 2 {
		t.Errorf("dry run reported %+v", dry.Removed)
	}
	if names := containerNames(t, b); !slices.Equal(names, []string{b.containerName("busy")}) {
		t.Errorf("after GC: %v; want only the busy session", names)
	}
	if bounded {
		for _, d := range []loopdisk.Disk{lostDisk, loopdisk.At(diskRoot, b.containerName("idle")+"-ws")} {
			if d.Exists() || d.Mounted() {
				t.Errorf("after GC, the bounded workspace %s is still there", d.Image)
			}
		}
		if d := loopdisk.At(diskRoot, b.containerName("busy")+"-ws"); !d.Mounted() {
			t.Errorf("after GC, the busy session's workspace %s is not mounted", d.Mount)
		}
	}
	// The reaped session comes back fresh and says so.
	again := open(t, b, "idle")
	if res := run(t, again, "pwd; cat /workspace/d 2>/dev/null || echo gone"); !res.EnvironmentRecreated || res.Stdout != "/workspace\ngone\n" {
		t.Errorf("reaped session = %q recreated %v", res.Stdout, res.EnvironmentRecreated)
	}
}

func TestSessionsAndRemove(t *testing.T) {
	b := newBackend(t, nil)
	s := open(t, b, "listed")
	run(t, s, "cd /tmp")
	list, err := b.Sessions(ctxT(t, 10*time.Second))
	if err != nil || len(list) != 1 {
		t.Fatalf("Sessions() = %+v, %v", list, err)
	}
	if info := list[0]; info.Name != "listed" || info.State != "running" || info.Created.IsZero() || info.Used.Before(info.Created) ||
		info.Cwd != "/tmp" {
		t.Errorf("Sessions()[0] = %+v", info)
	}
	if err := b.Remove(ctxT(t, 30*time.Second), "listed"); err != nil {
		t.Fatal(err)
	}
	if c, v := scopeObjects(t, b); c != 0 || v != 0 {
		t.Errorf("Remove left %d containers and %d volumes", c, v)
	}
	if err := b.Remove(ctxT(t, 30*time.Second), "listed"); err == nil || !strings.Contains(err.Error(), "no such session") {
		t.Errorf("second Remove = %v; want not found", err)
	}
}

func TestConcurrentSessions(t *testing.T) {
	const n = 32
	b := newBackend(t, nil)
	var wg sync.WaitGroup
	firsts := make([]time.Duration, n)
	warm := make([]time.Duration, 0, n*10)
	var mu sync.Mutex
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			start := time.Now()
			sess, err := b.Open(ctx, fmt.Sprintf("c%02d", i))
			if err != nil {
				errs <- err
				return
			}
			defer sess.Close()
			for j := 0; j < 11; j++ {
				t0 := time.Now()
				res, err := sess.Exec(ctx, sandbox.Command{Script: fmt.Sprintf("echo %d-%d", i, j)})
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprintf("%d-%d\n", i, j); res.Stdout != want {
					errs <- fmt.Errorf("session %d: %q; want %q", i, res.Stdout, want)
					return
				}
				if j == 0 {
					firsts[i] = time.Since(start)
				} else {
					mu.Lock()
					warm = append(warm, time.Since(t0))
					mu.Unlock()
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(containerNames(t, b)) != n {
		t.Errorf("%d containers; want %d", len(containerNames(t, b)), n)
	}
	t.Logf("32 concurrent sessions: first command p50 %v p95 %v; warm command p50 %v p95 %v",
		pctl(firsts, 50), pctl(firsts, 95), pctl(warm, 50), pctl(warm, 95))
}

func pctl(ds []time.Duration, p int) time.Duration { return testenv.Percentile(ds, p) }

func TestPoolReportsFailure(t *testing.T) {
	b := newBackend(t, func(c *config.Config) { c.Docker.PoolSize = 1; c.Docker.Image = "hermes-sandbox-test/absent:0" })
	err := b.Prewarm(ctxT(t, time.Minute))
	if err == nil || !strings.Contains(err.Error(), "image pull") {
		t.Errorf("Prewarm(missing image) = %v; want the missing-image error", err)
	}
	b.Close()
	if c, v := scopeObjects(t, b); c != 0 || v != 0 {
		t.Errorf("left %d containers, %d volumes", c, v)
	}
}

// TestGoroutinesOwned checks that closing sessions and the backend stops every goroutine the
// backend started: pool owner, stream demultiplexers, container watchers.
func TestGoroutinesOwned(t *testing.T) {
	testImage(t)
	runtime.GC()
	before := runtime.NumGoroutine()
	func() {
		b := newBackend(t, func(c *config.Config) { c.Docker.PoolSize = 1 })
		if err := b.Prewarm(ctxT(t, 2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"g1", "g2"} {
			sess, err := b.Open(ctxT(t, time.Minute), name)
			if err != nil {
				t.Fatal(err)
			}
			run(t, sess, "true")
			sess.Close()
		}
		b.Close()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after closing everything:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGCOwnerGone: the sandboxes of a process that removes its sessions when done (an MCP
// server) are removed by gc once that process is gone, however recently they were used;
// those of a live owner, and persistent sessions, stay.
func TestGCOwnerGone(t *testing.T) {
	state := t.TempDir()
	img := testImage(t)
	ephemeral := func(owner string) *Backend {
		cfg := config.NewConfig()
		cfg.Docker.Image = img
		b, err := NewWith(cfg.Docker, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state, Environ: testEnviron(), Ephemeral: true}),
			Options{Labels: map[string]string{testLabel: testRun}})
		if err != nil {
			t.Fatal(err)
		}
		b.owner = owner
		t.Cleanup(func() { b.Close() })
		return b
	}
	deadOwner := testenv.GoneOwner(t) // a process that has exited

	dead := ephemeral(deadOwner)
	live := ephemeral(sandbox.ProcessOwner())
	persistent := newBackendWith(t, state, func(c *config.Config) { c.Docker.Image = img })
	for b, name := range map[*Backend]string{dead: "mcp-dead", live: "mcp-live", persistent: "kept"} {
		sess := open(t, b, name)
		run(t, sess, "true")
		sess.Close()
	}
	rep, err := persistent.Collect(ctxT(t, 2*time.Minute), sandbox.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var removed []string
	for _, it := range rep.Removed {
		if it.Kind == "container" {
			removed = append(removed, it.Name)
		}
	}
	if want := []string{persistent.containerName("mcp-dead")}; !slices.Equal(removed, want) {
		t.Errorf("GC removed %v; want %v (kept %+v)", removed, want, rep.Kept)
	}
	names := containerNames(t, persistent)
	for _, n := range []string{"mcp-live", "kept"} {
		if !slices.Contains(names, persistent.containerName(n)) {
			t.Errorf("GC removed %s: left %v", n, names)
		}
	}
}
