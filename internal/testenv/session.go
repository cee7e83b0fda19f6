package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Main runs the tests, then force-removes the Docker containers and volumes labelled
// label=value and fails the run when there were any: a test left them behind. It also
// removes the binaries the tests built (RemoveBuilt). Before the tests it sweeps what dead
// test processes left under label (SweepDead).
func Main(m *testing.M, label, value string) {
	ReportSwept(label)
	code := m.Run()
	if leaked := RemoveLabelled(label, value); leaked != "" {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left docker objects behind (now removed): %s\n", leaked)
		if code == 0 {
			code = 1
		}
	}
	RemoveBuilt()
	os.Exit(code)
}

// Ctx is a context that ends after d or with the test.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Open opens the session name on b (within a minute) and closes it when the test ends.
func Open(t testing.TB, b sandbox.Backend, name string) sandbox.Session {
	t.Helper()
	sess, err := b.Open(Ctx(t, time.Minute), name)
	if err != nil {
		t.Fatalf("Open(%q) = %v", name, err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// Run runs script in sess (within two minutes) and fails the test if the runner fails.
func Run(t testing.TB, sess sandbox.Session, script string) *sandbox.Result {
	t.Helper()
	res, err := sess.Exec(Ctx(t, 2*time.Minute), sandbox.Command{Script: script})
	if err != nil {
		t.Fatalf("Exec(%q) error = %v", script, err)
	}
	LogOnFailure(t, "the session", script, res)
	return res
}

// Logger logs at debug level to stderr when HERMES_SANDBOX_TEST_DEBUG is set; otherwise nil
// (the backend's default).
func Logger() *slog.Logger {
	if os.Getenv("HERMES_SANDBOX_TEST_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
