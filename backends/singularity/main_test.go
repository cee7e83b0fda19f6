package singularity

import (
	"os"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// The conformance suites (direct and gated) are checks that mostly
// wait for a timeout, a cancel or a job: in the fast tier, run more of them at once.
func TestMain(m *testing.M) {
	testenv.WideParallel(6)
	os.Exit(m.Run())
}
