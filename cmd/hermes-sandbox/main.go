// Command hermes-sandbox runs an AI agent's shell commands in a sandbox backend. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hermes-sandbox/hermes-sandbox/internal/cli"
	// A warm exec is handed to its session owner before the rest of the binary initialises.
	_ "github.com/hermes-sandbox/hermes-sandbox/internal/owner/early"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cli.UseOwners()
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
