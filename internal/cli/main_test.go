package cli_test

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/cli"
)

// TestMain lets the test binary serve as hermes-sandbox's session owner: in-process CLI runs
// start owners with os.Executable(), which is this binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "__owner" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}
