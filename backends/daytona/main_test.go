package daytona

import (
	"context"
	"fmt"
	"os"
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

// testLabel marks every container the fake creates; TestMain checks none is left.
const testLabel = "hermes-sandbox.test"

var testRun = fmt.Sprintf("daytona-%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

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

// needEngine skips (or, with HERMES_SANDBOX_TEST_REQUIRE=docker, fails) without an engine:
// the fake's sandboxes are containers.
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
		testenv.Missing(t, "docker", "no Docker engine answers (the fake Daytona runs sandboxes as containers): "+engine.err.Error())
	}
	return engine.cli
}

var testImg struct {
	sync.Mutex
	ref string
}

// testImage is the busybox image the docker backend's tests use (same rootfs and tag),
// imported through the docker backend's Import.
func testImage(t testing.TB) string {
	t.Helper()
	cli := needEngine(t)
	testenv.AgentBinary(t)
	testImg.Lock()
	defer testImg.Unlock()
	if testImg.ref != "" {
		return testImg.ref
	}
	dir, sum := testenv.BusyboxRootfs(t)
	ref := "hermes-sandbox-test/busybox:" + sum
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		cfg := config.NewConfig()
		db, err := docker.NewWith(cfg.Docker, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir(), Environ: os.Environ()}), docker.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ImportImage(ctx, sandbox.ImageSource{RootfsDir: dir, Tag: ref}, sandbox.Progress{}); err != nil {
			t.Fatalf("import the test image: %v", err)
		}
	}
	testImg.ref = ref
	return ref
}

// newBackend returns a daytona backend pointed at f with state directory state; mut adjusts
// the configuration.
func newBackend(t testing.TB, f *fakeDaytona, state string, mut func(*config.Config)) *Backend {
	t.Helper()
	cfg := config.NewConfig()
	cfg.Daytona.APIURL = f.apiURL()
	cfg.Daytona.APIKey = config.Secret(f.key)
	if mut != nil {
		mut(cfg)
	}
	b, err := NewWith(cfg.Daytona, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state, Environ: []string{"HOME=" + os.Getenv("HOME")}}),
		Options{PollInterval: 25 * time.Millisecond, StateTimeout: time.Minute})
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

func open(t testing.TB, b sandbox.Backend, name string) sandbox.Session {
	t.Helper()
	sess, err := b.Open(ctxT(t, time.Minute), name)
	if err != nil {
		t.Fatalf("Open(%q) = %v", name, err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

func run(t testing.TB, sess sandbox.Session, script string) *sandbox.Result {
	t.Helper()
	res, err := sess.Exec(ctxT(t, 2*time.Minute), sandbox.Command{Script: script})
	if err != nil {
		t.Fatalf("Exec(%q) error = %v", script, err)
	}
	return res
}
