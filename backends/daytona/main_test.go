package daytona

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

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
	if leaked := testenv.RemoveLabelled(testLabel, testRun); leaked != "" {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left docker containers behind (now removed): %s\n", leaked)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// needEngine skips (or, with HERMES_SANDBOX_TEST_REQUIRE=docker, fails) without an engine.
func needEngine(t testing.TB) *client.Client { t.Helper(); return testenv.Docker(t) }

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
