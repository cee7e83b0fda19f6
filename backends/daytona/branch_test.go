package daytona

import (
	"errors"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestNoBranching: daytona neither claims nor implements branching, and says why.
func TestNoBranching(t *testing.T) {
	var b any = &Backend{}
	if _, ok := b.(sandbox.Brancher); ok {
		t.Fatal("daytona implements sandbox.Brancher, but the contract does not support it (branch.go)")
	}
	err := (&Backend{}).NoBranching()
	if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "running") {
		t.Errorf("NoBranching() = %v; want ErrUnsupported saying why", err)
	}
}
