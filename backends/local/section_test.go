package local

import (
	"errors"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestUnsupportedSaysWhereToGo: the refusal on Windows (local_windows.go) names the platform
// and the two ways to run there, WSL and a backend that runs elsewhere.
func TestUnsupportedSaysWhereToGo(t *testing.T) {
	err := unsupported("windows")
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("unsupported(windows) = %v; want ErrUnavailable", err)
	}
	for _, want := range []string{"this is windows", "WSL", "docker", "npipe:", "ssh", "kubernetes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("unsupported(windows) = %q; want it to mention %q", err, want)
		}
	}
}
