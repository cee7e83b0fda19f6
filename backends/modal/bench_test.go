//go:build unix

package modal

import (
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// BenchmarkExecWarm is the per-command overhead of `true` on the warm helper channel (one
// stdin RPC and the streamed reply), against the fake Modal on loopback.
func BenchmarkExecWarm(b *testing.B) {
	f := newFake(b)
	be := newBackend(b, f, b.TempDir(), nil)
	testenv.BenchWarm(b, open(b, be, "bench-warm"), 10)
}

// BenchmarkSDKExec is the baseline: one SDK Exec per command (start, then wait), in the same
// kind of sandbox on the same fake.
func BenchmarkSDKExec(b *testing.B) {
	f := newFake(b)
	be := newBackend(b, f, b.TempDir(), nil)
	testenv.ExecTrue(b, open(b, be, "bench-sdk"))
	testenv.BenchBaseline(b, be, "bench-sdk", 3)
}

// BenchmarkCreateToFirstResult is a new session's first `true`: sandbox create (a container on
// the fake), helper start (uploaded once per sandbox) and the command.
func BenchmarkCreateToFirstResult(b *testing.B) {
	f := newFake(b)
	be := newBackend(b, f, b.TempDir(), nil)
	testenv.BenchFirstResult(b, be, "bench-first", nil)
}
