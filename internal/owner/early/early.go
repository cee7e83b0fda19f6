// Package early hands `hermes-sandbox exec` to a warm session owner (package owner) before
// the rest of the binary initialises. The binary's package initialisation (protobuf
// registries, API schemes, compiled patterns) costs several times what a warm exec does, and
// Go runs this package's init among the first because it imports only low-level standard
// packages. When no owner takes the call, init returns and the binary starts as usual.
//
// Only cmd/hermes-sandbox imports it.
package early

import (
	"errors"
	"fmt"
	"os"

	"github.com/hermes-sandbox/hermes-sandbox/internal/owner"
)

func init() {
	args := os.Args[1:]
	if !owner.IsExec(args) {
		return
	}
	env := os.Environ()
	h, err := owner.NewHello(args, env, owner.IsTerminal(0))
	if err != nil {
		return
	}
	sock, err := owner.SocketPath(env, h.Key)
	if err != nil {
		return
	}
	code, err := owner.Forward(sock, h, os.Stdin, os.Stdout, os.Stderr)
	if errors.Is(err, owner.ErrNoOwner) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "hermes-sandbox: %v\n", err)
	}
	os.Exit(code)
}
