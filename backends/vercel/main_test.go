//go:build unix

package vercel

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/dockerimage"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// testLabel marks the fake's containers; TestMain fails when any is left.
const testLabel = "hermes-sandbox.test.vercel"

var testRun = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

func TestMain(m *testing.M) { testenv.Main(m, testLabel, testRun) }

func needEngine(t testing.TB) *client.Client {
	t.Helper()
	return testenv.DockerEngine(t, "the fake Vercel API runs each sandbox in a container, and ")
}

// fakeRootfs is the fake's "runtime" image: root only, /vercel/sandbox (the default cwd),
// a 1777 /tmp.
var fakeRootfs = testenv.Rootfs{
	Name:    "hermes-sandbox-test/vercel-busybox",
	Layout:  "vercel-fake-rootfs-v2: /bin applets, root only, /tmp 1777, /vercel/sandbox",
	Dirs:    []string{"tmp", "proc", "sys", "dev", "root", "vercel/sandbox"},
	TmpMode: 0o1777,
	Passwd:  "root:x:0:0:root:/root:/bin/sh\n",
	Group:   "root:x:0:\n",
}

// testImage is a busybox-static root filesystem imported through backends/docker's Import
// (the Engine API).
func testImage(t testing.TB) string {
	t.Helper()
	return dockerimage.Busybox(t, "the fake Vercel API runs each sandbox in a container, and ", fakeRootfs)
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

var (
	ctxT = testenv.Ctx
	run  = testenv.Run
)
