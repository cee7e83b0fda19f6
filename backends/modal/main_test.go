package modal

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/hermes-sandbox/hermes-sandbox/backends/docker"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// testLabel marks every container the fake makes; TestMain fails when any is left.
const testLabel = "hermes-sandbox.test"

var testRun = fmt.Sprintf("modal-%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

func TestMain(m *testing.M) {
	code := m.Run()
	if leaked := leftovers(); leaked != "" {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left containers behind (now removed): %s\n", leaked)
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
	return strings.Join(testenv.RemoveContainers(cli, testLabel+"="+testRun), ", ")
}

// needEngine skips (or, with HERMES_SANDBOX_TEST_REQUIRE=docker, fails) without an engine:
// the fake runs its sandboxes as containers.
func needEngine(t testing.TB) *client.Client {
	t.Helper()
	return testenv.DockerEngine(t, "the fake Modal runs sandboxes as containers and ")
}

var testImg struct {
	sync.Mutex
	ref string
}

// testImage is the busybox image the docker backend's tests use, imported the same way.
func testImage(t testing.TB) string {
	t.Helper()
	cli := needEngine(t)
	testImg.Lock()
	defer testImg.Unlock()
	if testImg.ref != "" {
		return testImg.ref
	}
	dir, ref := testenv.BusyboxRootfs(t, "docker")
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

// newFake starts a fake Modal with the test image behind every registry tag it knows.
func newFake(t testing.TB) *fakeModal {
	t.Helper()
	testenv.AgentBinary(t)
	return startFake(t, needEngine(t), testImage(t), testLabel+"="+testRun)
}

// fakeConfig is a configuration pointing at f with its token.
func fakeConfig(f *fakeModal) *config.Config {
	cfg := config.NewConfig()
	cfg.Modal.ServerURL = f.url()
	cfg.Modal.TokenID = config.Secret(f.tokenID)
	cfg.Modal.TokenSecret = config.Secret(f.tokenSecret)
	cfg.Modal.Timeout = 10 * time.Minute
	cfg.Modal.IdleTimeout = 5 * time.Minute
	return cfg
}

// newBackend returns a backend on f with a given state directory; mut adjusts the config.
func newBackend(t testing.TB, f *fakeModal, state string, mut func(*config.Config)) *Backend {
	t.Helper()
	cfg := fakeConfig(f)
	if mut != nil {
		mut(cfg)
	}
	b, err := NewWith(cfg.Modal, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state, Environ: []string{"HOME=" + t.TempDir()}, Logger: testLogger(t)}), Options{})
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

// run runs a script and fails the test if the runner fails.
func run(t testing.TB, sess sandbox.Session, script string) *sandbox.Result {
	t.Helper()
	res, err := sess.Exec(ctxT(t, 2*time.Minute), sandbox.Command{Script: script})
	if err != nil {
		t.Fatalf("Exec(%q) error = %v", script, err)
	}
	return res
}

// testLogger logs to the test at debug level when HERMES_SANDBOX_TEST_DEBUG is set.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("HERMES_SANDBOX_TEST_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
