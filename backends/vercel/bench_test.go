//go:build unix

package vercel

import (
	"context"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// BenchmarkExecWarm is the per-command overhead of `true` in a warm session: one round trip
// on the helper's channel over the PTY WebSocket.
func BenchmarkExecWarm(b *testing.B) {
	s := newSetup(b)
	be := s.backend(b, nil)
	sess, err := be.Open(context.Background(), "bench-warm")
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	testenv.BenchWarm(b, sess, 20)
}

// BenchmarkRESTCommand is the baseline: one REST command per call (POST …/cmd with wait
// and its NDJSON stream, as the SDK's runCommand does) of `true`, in the same sandbox.
func BenchmarkRESTCommand(b *testing.B) {
	s := newSetup(b)
	be := s.backend(b, nil)
	testenv.BenchBaseline(b, be, "bench-rest", 5)
}

// BenchmarkFirstResult is create → first result: Open and the first command of a new
// session (create the sandbox, wait for it to run, upload the helper with fs/write, start
// it on the PTY, run `true`).
func BenchmarkFirstResult(b *testing.B) {
	s := newSetup(b)
	be := s.backend(b, nil)
	warm, err := be.Open(context.Background(), "bench-first-warmup") // the helper is packed once per process
	if err != nil {
		b.Fatal(err)
	}
	testenv.ExecTrue(b, warm)
	warm.Close()
	testenv.BenchFirstResult(b, be, "bench-first", nil)
}
