package daytona

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

// testLabel marks every container the fake creates; TestMain checks none is left.
const testLabel = "hermes-sandbox.test"

var testRun = fmt.Sprintf("daytona-%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

func TestMain(m *testing.M) { testenv.Main(m, testLabel, testRun) }

// needEngine skips (or, with HERMES_SANDBOX_TEST_REQUIRE=docker, fails) without an engine.
func needEngine(t testing.TB) *client.Client { t.Helper(); return testenv.Docker(t) }

// testImage is the busybox image the docker backend's tests use (same rootfs and tag),
// imported through the docker backend's Import.
func testImage(t testing.TB) string {
	t.Helper()
	return dockerimage.Busybox(t, "the fake Daytona runs sandboxes as containers and ", testenv.DefaultRootfs)
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
		Options{PollInterval: 25 * time.Millisecond, StateTimeout: time.Minute, CallerBeat: time.Second, CallerSilence: 5 * time.Second})
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
