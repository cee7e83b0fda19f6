package gate_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// inContainer presents the local backend as one whose commands run in a machine of their own
// (Capabilities().Host false), as docker's do.
type inContainer struct{ sandbox.Backend }

func (b inContainer) Capabilities() sandbox.Capabilities {
	c := b.Backend.Capabilities()
	c.Host = false
	return c
}

// TestContainerEntryFromHostAsks: on a backend that runs on the host (local), entering a
// container or namespace from there needs approval; where the sandbox is a container of its
// own, the same words reach only what it can, and run.
func TestContainerEntryFromHostAsks(t *testing.T) {
	const line = "kubectl exec hermes-test-no-such-pod -- ls"
	e := newEnv(t, func(o *gate.Options) { o.Mode = config.ApprovalDeny })
	if !e.b.Capabilities().Host {
		t.Fatal("the local backend does not say it runs on the host")
	}
	_, err := e.session(t).Exec(context.Background(), sandbox.Command{Script: line})
	refusal(t, err, "denied")

	dir := t.TempDir()
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = dir
	lb, err := local.New(cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(dir, "state"),
		Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + dir}}))
	if err != nil {
		t.Fatal(err)
	}
	b := gate.Wrap(inContainer{lb}, gate.Options{Mode: config.ApprovalDeny, Tools: cfg.Tools})
	defer b.Close()
	s, err := b.Open(context.Background(), "s2")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Exec(context.Background(), sandbox.Command{Script: line}); err != nil {
		t.Fatalf("in a container of its own, %q was refused: %v", line, err)
	}
}
