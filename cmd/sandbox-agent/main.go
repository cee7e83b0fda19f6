// Command sandbox-agent is the helper that runs inside a sandbox and serves one Hermes Sandbox
// session over stdin and stdout. Build it static: CGO_ENABLED=0 go build ./cmd/sandbox-agent.
package main

import (
	"os"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
)

func main() {
	os.Exit(agent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
