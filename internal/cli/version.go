package cli

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprint(a.stdout, versionLine())
			return nil
		},
	}
}

// versionLine is what both `version` and `--version` print.
func versionLine() string {
	return fmt.Sprintf("hermes-sandbox %s (%s, %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// setVersionFlag makes `hermes-sandbox --version` print what `version` does. The flag is
// declared here so that cobra adds no -v shorthand of its own.
func setVersionFlag(root *cobra.Command) {
	root.Version = Version
	root.SetVersionTemplate(strings.ReplaceAll(versionLine(), "{{", "{{`{{`}}"))
	root.Flags().Bool("version", false, "print the version (as the version command does)")
}
