//go:build !windows

package local_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestPassthroughFollowsCaller is issue #36 item 6: a terminal.env_passthrough variable takes
// the caller's current value at each call of a session, not the value the session first saw;
// what the session exported itself is kept.
func TestPassthroughFollowsCaller(t *testing.T) {
	root, err := os.MkdirTemp("/var/tmp", "hermes-local-pass-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	state, work := filepath.Join(root, "state"), filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	call := func(token, script string) string {
		t.Helper()
		cfg := config.NewConfig()
		cfg.Terminal.Cwd = work
		cfg.Terminal.EnvPassthrough = []string{"HERMES_TEST_TOKEN"}
		b, err := local.NewWith(local.SectionOf(cfg), cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state,
			Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root, "HERMES_TEST_TOKEN=" + token}}))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		sess, err := b.Open(testenv.Ctx(t, time.Minute), "rot")
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		return testenv.Run(t, sess, script).Stdout
	}
	if got := call("one", "echo $HERMES_TEST_TOKEN; export Y=1"); got != "one\n" {
		t.Fatalf("first call sees %q; want one", got)
	}
	if got := call("two", "echo $HERMES_TEST_TOKEN $Y"); got != "two 1\n" {
		t.Errorf("after the caller rotated the value, the session sees %q; want two 1", got)
	}
}
