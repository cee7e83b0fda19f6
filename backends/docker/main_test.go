package docker

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// testLabel marks everything this test process creates; TestMain checks that none of it is
// left when the tests end.
const testLabel = "hermes-sandbox.test"

var testRun = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

func TestMain(m *testing.M) {
	code := m.Run()
	if leaked := leftovers(); leaked != "" {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left docker objects behind (now removed): %s\n", leaked)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// leftovers removes and lists the containers and volumes labelled with this run.
func leftovers() string {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return ""
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", testLabel+"="+testRun))
	var names []string
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return ""
	}
	for _, c := range list {
		names = append(names, "container "+strings.Join(c.Names, ","))
		cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
	vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err == nil {
		for _, v := range vols.Volumes {
			names = append(names, "volume "+v.Name)
			cli.VolumeRemove(ctx, v.Name, true)
		}
	}
	return strings.Join(names, ", ")
}

var engine struct {
	sync.Once
	cli *client.Client
	err error
}

// needEngine skips (or, with HERMES_SANDBOX_TEST_REQUIRE=docker, fails) without an engine.
func needEngine(t testing.TB) *client.Client {
	t.Helper()
	engine.Do(func() {
		engine.cli, engine.err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if engine.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, engine.err = engine.cli.Ping(ctx)
	})
	if engine.err != nil {
		testenv.Missing(t, "docker", "no Docker engine answers: "+engine.err.Error())
	}
	return engine.cli
}

var testImg struct {
	sync.Mutex
	ref string
}

// testImage returns a small image built from Debian's busybox-static: a root filesystem in
// a temporary directory, turned into a tar in Go and imported through the Engine API. Its
// tag carries a hash of its content, so it is built once and then found again.
func testImage(t testing.TB) string {
	t.Helper()
	needEngine(t)
	testenv.AgentBinary(t)
	testImg.Lock()
	defer testImg.Unlock()
	if testImg.ref != "" {
		return testImg.ref
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		bb = "/bin/busybox"
	}
	if err := checkStatic(bb); err != nil {
		testenv.Missing(t, "docker", "the test image needs a static busybox: apt-get install busybox-static ("+err.Error()+")")
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	applets := strings.Fields(string(out))
	const layout = "busybox-rootfs-v2: /bin applets, passwd with sandbox(1000), /tmp 0755, no /workspace"
	sum := sha256.Sum256(append(data, layout...))
	ref := "hermes-sandbox-test/busybox:" + hex.EncodeToString(sum[:])[:12]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := needEngine(t)
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		testImg.ref = ref
		return ref
	}
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin", "etc", "tmp", "proc", "sys", "dev", "root", "usr/bin", "home/sandbox"} {
		must(os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	// /tmp 0755, as in a bare root filesystem: the sandbox must still work.
	must(os.Chmod(filepath.Join(dir, "tmp"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "bin", "busybox"), data, 0o755))
	for _, a := range applets {
		if a == "busybox" {
			continue
		}
		must(os.Symlink("busybox", filepath.Join(dir, "bin", a)))
	}
	must(os.Symlink("/bin/env", filepath.Join(dir, "usr", "bin", "env")))
	must(os.WriteFile(filepath.Join(dir, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "etc", "group"), []byte("root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"), 0o644))
	b := newBackendWith(t, t.TempDir(), func(c *config.Config) { c.Docker.Image = ref })
	if _, err := b.ImportImage(ctx, sandbox.ImageSource{RootfsDir: dir, Tag: ref}, sandbox.Progress{}); err != nil {
		t.Fatalf("import the test image: %v", err)
	}
	testImg.ref = ref
	return ref
}

func checkStatic(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", p)
		}
	}
	return nil
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

// cleanScope removes every container and volume of b's state directory.
func cleanScope(t testing.TB, b *Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := needEngine(t)
	f := filters.NewArgs(filters.Arg("label", labelScope+"="+b.scope))
	list, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range list {
		cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
	vols, _ := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	for _, v := range vols.Volumes {
		cli.VolumeRemove(ctx, v.Name, true)
	}
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// run runs a script in sess and fails the test if the runner fails.
func run(t testing.TB, sess sandbox.Session, script string) *sandbox.Result {
	t.Helper()
	res, err := sess.Exec(ctxT(t, 2*time.Minute), sandbox.Command{Script: script})
	if err != nil {
		t.Fatalf("Exec(%q) error = %v", script, err)
	}
	return res
}

func open(t testing.TB, b *Backend, name string) sandbox.Session {
	t.Helper()
	sess, err := b.Open(ctxT(t, time.Minute), name)
	if err != nil {
		t.Fatalf("Open(%q) = %v", name, err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}
