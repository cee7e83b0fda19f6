package all

import (
	"errors"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestLocalRefusedOnWindows: choosing local on Windows is an error that points to WSL and the
// backends that run elsewhere, not a crash or a command run unconfined. (Compiled and vetted
// on Linux by `make cross`; backends/local's TestUnsupportedSaysWhereToGo checks the text.)
func TestLocalRefusedOnWindows(t *testing.T) {
	r := Backends()
	if !r.Has("local") {
		t.Fatal("local is not registered")
	}
	b, err := r.New("local", config.NewConfig(), sandbox.FactoryOptions{StateDir: t.TempDir()})
	if err == nil || !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "WSL") {
		t.Errorf("New(local) on Windows = %v, %v; want ErrUnavailable pointing to WSL", b, err)
	}
}
