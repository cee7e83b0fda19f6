package vercel

import (
	"context"
	"crypto/sha256"
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
	"github.com/docker/docker/client"

	"github.com/hermes-sandbox/hermes-sandbox/backends/docker"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// testLabel marks the fake's containers; TestMain fails when any is left.
const testLabel = "hermes-sandbox.test.vercel"

var testRun = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

func TestMain(m *testing.M) {
	code := m.Run()
	if leaked := leftovers(); leaked != "" {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left docker containers behind (now removed): %s\n", leaked)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func leftovers() string {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return ""
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", testLabel+"="+testRun))})
	if err != nil {
		return ""
	}
	var names []string
	for _, c := range list {
		names = append(names, strings.Join(c.Names, ","))
		cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
	return strings.Join(names, ", ")
}

var engine struct {
	sync.Once
	cli *client.Client
	err error
}

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
		testenv.Missing(t, "docker", "the fake Vercel API runs each sandbox in a container, and no Docker engine answers: "+engine.err.Error())
	}
	return engine.cli
}

var testImg struct {
	sync.Mutex
	ref string
}

// testImage is a busybox-static root filesystem imported through backends/docker's Import
// (the Engine API): the fake's "runtime" image. /vercel/sandbox is the default cwd.
func testImage(t testing.TB) string {
	t.Helper()
	cli := needEngine(t)
	testenv.AgentBinary(t)
	testImg.Lock()
	defer testImg.Unlock()
	if testImg.ref != "" {
		return testImg.ref
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		testenv.Missing(t, "docker", "the fake's image needs busybox-static: apt-get install busybox-static")
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	const layout = "vercel-fake-rootfs-v1"
	sum := sha256.Sum256(append(data, layout...))
	ref := "hermes-sandbox-test/vercel-busybox:" + hex.EncodeToString(sum[:])[:12]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		testImg.ref = ref
		return ref
	}
	dir := t.TempDir()
	for _, d := range []string{"bin", "etc", "tmp", "proc", "sys", "dev", "root", "usr/bin", "vercel/sandbox"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(dir, "tmp"), 0o1777)
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" {
			os.Symlink("busybox", filepath.Join(dir, "bin", a))
		}
	}
	os.Symlink("/bin/env", filepath.Join(dir, "usr", "bin", "env"))
	os.WriteFile(filepath.Join(dir, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "etc", "group"), []byte("root:x:0:\n"), 0o644)
	cfg := config.NewConfig()
	db, err := docker.NewWith(cfg.Docker, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir(), Environ: os.Environ()}), docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ImportImage(ctx, sandbox.ImageSource{RootfsDir: dir, Tag: ref}, sandbox.Progress{}); err != nil {
		t.Fatalf("import the fake's image: %v", err)
	}
	testImg.ref = ref
	return ref
}

// setup is a fake API plus what a backend needs to reach it.
type setup struct {
	f     *fake
	state string
}

func newSetup(t testing.TB) *setup {
	t.Helper()
	img := testImage(t)
	return &setup{f: newFake(t, needEngine(t), img), state: t.TempDir()}
}

// config returns a configuration pointing at the fake with a token.
func (s *setup) config(mut func(*config.Config)) *config.Config {
	cfg := config.NewConfig()
	cfg.Vercel.APIURL = s.f.url()
	cfg.Vercel.Token = config.Secret(s.f.token)
	cfg.Vercel.TeamID = s.f.team
	cfg.Vercel.ProjectID = s.f.project
	if mut != nil {
		mut(cfg)
	}
	return cfg
}

// backend returns a backend on the fake; each call is like a new process.
func (s *setup) backend(t testing.TB, mut func(*config.Config)) *Backend {
	t.Helper()
	cfg := s.config(mut)
	b, err := NewWith(cfg.Vercel, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: s.state, Environ: []string{"PATH=/usr/bin:/bin"}}), Options{})
	if err != nil {
		t.Fatalf("NewWith() = %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func run(t testing.TB, sess sandbox.Session, script string) *sandbox.Result {
	t.Helper()
	res, err := sess.Exec(ctxT(t, 2*time.Minute), sandbox.Command{Script: script})
	if err != nil {
		t.Fatalf("Exec(%q) error = %v", script, err)
	}
	return res
}
