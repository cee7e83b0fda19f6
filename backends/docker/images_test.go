//go:build unix

package docker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// builtImageBackend is a backend whose docker.image is the default (left unset unless
// explicit) and whose built image (config.BuiltDockerImage in real use) is built.
func builtImageBackend(t *testing.T, built string, explicit bool) *Backend {
	t.Helper()
	cfg := config.NewConfig()
	opts := cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir(), Environ: testEnviron()})
	if explicit {
		opts.Explicit = func(key string) bool { return key == "docker.image" }
	}
	b, err := NewWith(cfg.Docker, opts, Options{Labels: map[string]string{testLabel: testRun}, BuiltImage: built})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		cleanScope(t, b)
	})
	return b
}

// TestBuiltImageStandsInForAMissingDefault: with docker.image left at its default and that
// image not on the engine (no registry here), sessions run the image `make run` builds, and
// the backend says so; an image the user chose is never swapped, and with neither image the
// error gives the command that builds one without a registry.
func TestBuiltImageStandsInForAMissingDefault(t *testing.T) {
	built := testImage(t)
	cli := needEngine(t)
	ctx := ctxT(t, 2*time.Minute)
	def := config.NewConfig().Docker.Image
	if _, err := cli.ImageInspect(ctx, def); err == nil {
		t.Skipf("needs an engine without the default image %s (it has it, so nothing stands in for it)", def)
	}

	b := builtImageBackend(t, built, false)
	if err := b.Check(ctx); err != nil {
		t.Fatalf("Check() with the default missing and the built image present = %v; want nil", err)
	}
	if note := b.ImageNote(ctx); !strings.Contains(note, built) || !strings.Contains(note, "config set docker.image "+built) {
		t.Errorf("ImageNote() = %q; want it to name %s and how to make it the setting", note, built)
	}
	sess := open(t, b, "built")
	if res := run(t, sess, "echo in-built"); res.Stdout != "in-built\n" {
		t.Fatalf("a command in the stand-in image printed %q, stderr %q", res.Stdout, res.Stderr)
	}
	ci, err := cli.ContainerInspect(ctx, b.containerName("built"), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ci.Container.Config.Image; got != built {
		t.Errorf("the session's container runs %q; want the built image %q", got, built)
	}

	// Chosen by the user (file, environment or flag), the missing image is an error.
	chosen := builtImageBackend(t, built, true)
	err = chosen.Check(ctx)
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), config.BuildDockerImage) {
		t.Errorf("Check() with docker.image chosen and missing = %v; want ErrNotFound naming %q", err, config.BuildDockerImage)
	}
	if note := chosen.ImageNote(ctx); note != "" {
		t.Errorf("ImageNote() with docker.image chosen = %q; want none", note)
	}

	// Neither image: the way to build one, not only a pull that needs a registry.
	none := builtImageBackend(t, "hermes-sandbox-test/absent:"+sandbox.RandomHex(4), false)
	err = none.Check(ctx)
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), config.BuildDockerImage) || !strings.Contains(err.Error(), "make run") {
		t.Errorf("Check() with neither image = %v; want ErrNotFound naming %q and make run", err, config.BuildDockerImage)
	}
}
