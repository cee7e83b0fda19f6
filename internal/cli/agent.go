package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
)

// agentCmd lets the static hermes-sandbox binary serve as its own in-sandbox helper.
func agentCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "__agent",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := agent.Main(args, os.Stdin, os.Stdout, os.Stderr); code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
}
