//go:build unix

package modal

import (
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/dockerimage"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// testLabel marks every container the fake makes; TestMain fails when any is left.
const testLabel = "hermes-sandbox.test"

var testRun = fmt.Sprintf("modal-%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

func TestMain(m *testing.M) { testenv.Main(m, testLabel, testRun) }

// needEngine skips (or, with HERMES_SANDBOX_TEST_REQUIRE=docker, fails) without an engine:
// the fake runs its sandboxes as containers.
func needEngine(t testing.TB) *client.Client {
	t.Helper()
	return testenv.DockerEngine(t, "the fake Modal runs sandboxes as containers and ")
}

// testImage is the busybox image the docker backend's tests use, imported the same way.
func testImage(t testing.TB) string {
	t.Helper()
	return dockerimage.Busybox(t, "the fake Modal runs sandboxes as containers and ", testenv.DefaultRootfs)
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

var (
	ctxT = testenv.Ctx
	open = testenv.Open
	run  = testenv.Run
)

// testLogger logs to the test at debug level when HERMES_SANDBOX_TEST_DEBUG is set.
func testLogger(testing.TB) *slog.Logger { return testenv.Logger() }
