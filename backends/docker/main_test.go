//go:build unix

package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// testLabel marks everything this test process creates; TestMain checks that none of it is
// left when the tests end.
const testLabel = "hermes-sandbox.test"

var testRun = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

// The suite runs against another engine or runtime when told:
//   - HERMES_SANDBOX_TEST_PODMAN_SOCKET (unix:///run/hermes-podman/podman.sock): every test
//     talks to Podman's Docker-compatible service instead of DOCKER_HOST;
//   - HERMES_SANDBOX_TEST_DOCKER_RUNTIME (runsc): every backend a test makes uses that
//     docker.runtime unless the test sets one itself.
var (
	testPodman   = os.Getenv("HERMES_SANDBOX_TEST_PODMAN_SOCKET")
	testRuntime  = os.Getenv("HERMES_SANDBOX_TEST_DOCKER_RUNTIME")
	testRootless = false
)

func init() {
	// HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET (unix:///run/user/UID/podman/podman.sock, a
	// service of an unprivileged user's): the same, against rootless Podman, with
	// docker.disk_limit and the resource limits 0 unless a test sets them.
	if s := os.Getenv("HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET"); s != "" && testPodman == "" {
		testPodman, testRootless = s, true
	}
}

func TestMain(m *testing.M) {
	if testPodman != "" {
		// Before anything reads it: testenv's engine client and every backend's environment.
		os.Setenv("DOCKER_HOST", testPodman)
	}
	testenv.Main(m, testLabel, testRun)
}

// needEngine skips (or, with HERMES_SANDBOX_TEST_REQUIRE=docker, fails) without an engine.
func needEngine(t testing.TB) *client.Client {
	t.Helper()
	if testPodman != "" {
		return testenv.DockerEngine(t, "Podman at "+testPodman+" (HERMES_SANDBOX_TEST_PODMAN_SOCKET; start it with podman system service --time=0 "+testPodman+"): ")
	}
	return testenv.DockerEngine(t, "")
}

var runtimeCheck struct {
	sync.Once
	err error
}

// needRuntime skips (or fails, when HERMES_SANDBOX_TEST_REQUIRE names it) unless the engine
// has the runtime registered.
func needRuntime(t testing.TB, name string) {
	t.Helper()
	cli := needEngine(t)
	runtimeCheck.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		info, err := cli.Info(ctx, client.InfoOptions{})
		if err != nil {
			runtimeCheck.err = err
			return
		}
		if _, ok := info.Info.Runtimes[name]; !ok {
			runtimeCheck.err = fmt.Errorf("the engine has no runtime %q registered (scripts/test-deps.sh registers runsc)", name)
		}
	})
	if runtimeCheck.err != nil {
		testenv.Missing(t, name, runtimeCheck.err.Error())
	}
}

var testImg struct {
	sync.Mutex
	ref string
}

// testImage returns a small image built from Debian's busybox-static (testenv.BusyboxRootfs),
// turned into a tar in Go and imported through the Engine API. Its
// tag carries a hash of its content, so it is built once and then found again.
func testImage(t testing.TB) string {
	t.Helper()
	needEngine(t)
	agent := testenv.AgentBinary(t)
	if testRootless {
		// The rootless engine's user bind-mounts the helper: its directories (this process's
		// private temporary ones) must let that user in. A user's own CLI writes the helper
		// into that user's cache, which needs nothing of the kind.
		for _, d := range []string{filepath.Dir(agent), filepath.Dir(filepath.Dir(agent))} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	testImg.Lock()
	defer testImg.Unlock()
	if testImg.ref != "" {
		return testImg.ref
	}
	dir, ref := testenv.BusyboxRootfs(t, "docker")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := needEngine(t)
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		testImg.ref = ref
		return ref
	}
	b := newBackendWith(t, t.TempDir(), func(c *config.Config) { c.Docker.Image = ref })
	if _, err := b.ImportImage(ctx, sandbox.ImageSource{RootfsDir: dir, Tag: ref}, sandbox.Progress{}); err != nil {
		t.Fatalf("import the test image: %v", err)
	}
	testImg.ref = ref
	return ref
}

// newBackend returns a docker backend on the test image with a fresh state directory; mut
// adjusts the configuration. Everything it creates is removed when the test ends.
func newBackend(t testing.TB, mut func(*config.Config)) *Backend {
	t.Helper()
	img := testImage(t)
	return newBackendWith(t, t.TempDir(), func(c *config.Config) {
		c.Docker.Image = img
		if mut != nil {
			mut(c)
		}
	})
}

func newBackendWith(t testing.TB, state string, mut func(*config.Config)) *Backend {
	t.Helper()
	cfg := config.NewConfig()
	if testRuntime != "" {
		needRuntime(t, testRuntime)
		cfg.Docker.Runtime = testRuntime
	}
	if testRootless {
		// A rootless engine cannot see the loop-mounted workspaces (disk.go), and on cgroup v1
		// it sets no resource limits (limitsUnenforced; TestPodmanRootless checks the refusal).
		cfg.Docker.DiskLimit, cfg.Docker.MemoryLimit, cfg.Docker.CPUQuota, cfg.Docker.PidsLimit = 0, 0, 0, 0
	}
	if mut != nil {
		mut(cfg)
	}
	b, err := NewWith(cfg.Docker, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state, Environ: testEnviron()}),
		Options{Labels: map[string]string{testLabel: testRun}})
	if err != nil {
		t.Fatalf("NewWith() = %v", err)
	}
	t.Cleanup(func() {
		b.Close()
		cleanScope(t, b)
	})
	return b
}

func testEnviron() []string {
	env := []string{"HOME=" + os.Getenv("HOME"), "PATH=/usr/bin:/bin"}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		env = append(env, "DOCKER_HOST="+h)
	}
	return env
}

// cleanScope removes every container, volume and bounded workspace of b's state directory.
func cleanScope(t testing.TB, b *Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := needEngine(t)
	f := client.Filters{}.Add("label", labelScope+"="+b.scope)
	list, _ := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	for _, c := range list.Items {
		cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	}
	vols, _ := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	for _, v := range vols.Items {
		cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
		b.dropDisk(v.Name)
	}
	// Snapshot images (branch.go): their references name the scope; untagged ones (a fork's
	// commit) carry its label.
	if dang, err := cli.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.Add("dangling", "true").Add("label", labelScope+"="+b.scope)}); err == nil {
		for _, im := range dang.Items {
			cli.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{Force: true})
		}
	}
	if refs, err := cli.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.Add("reference", "hermes-snapshot-"+b.scope)}); err == nil {
		for _, im := range refs.Items {
			cli.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		}
	}
	imgs, _ := b.scopeDisks(".img")
	for _, img := range imgs {
		b.dropDisk(strings.TrimSuffix(filepath.Base(img), ".img"))
	}
	locks, _ := b.scopeDisks(".img.lock")
	for _, l := range locks {
		os.Remove(l)
	}
}

var (
	ctxT = testenv.Ctx
	open = testenv.Open
	run  = testenv.Run
)
