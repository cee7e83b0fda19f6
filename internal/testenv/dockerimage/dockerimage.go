// Package dockerimage imports busybox test images through the docker backend's ImportImage
// (the Engine API; there is no registry here), for the fakes of backends that run their
// sandboxes as containers. The docker backend's own tests cannot import it (a cycle).
package dockerimage

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/backends/docker"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

var imported struct {
	sync.Mutex
	refs map[string]string // guarded by the embedded Mutex; layout name → image reference
}

// Busybox returns an image of the busybox root filesystem fs on the test engine, importing
// it once (its tag is a hash of its content, so a later test process finds it). It also
// builds the helper binary (testenv.AgentBinary), which every such fake needs. It skips the
// test (see testenv.Missing) without an engine or busybox-static; why says what needs it.
func Busybox(t testing.TB, why string, fs testenv.Rootfs) string {
	t.Helper()
	cli := testenv.DockerEngine(t, why)
	testenv.AgentBinary(t)
	imported.Lock()
	defer imported.Unlock()
	if ref := imported.refs[fs.Layout]; ref != "" {
		return ref
	}
	dir, ref := testenv.BusyboxRootfsWith(t, "docker", fs)
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
			t.Fatalf("import the test image %s: %v", ref, err)
		}
	}
	if imported.refs == nil {
		imported.refs = map[string]string{}
	}
	imported.refs[fs.Layout] = ref
	return ref
}
