package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) versionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(struct {
					Version  string   `json:"version"`
					Go       string   `json:"go"`
					OS       string   `json:"os"`
					Arch     string   `json:"arch"`
					Backends []string `json:"backends"` // built into this binary
				}{Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, a.registry.Names()})
			}
			fmt.Fprint(a.stdout, versionLine())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {version, go, os, arch, backends} as JSON")
	return cmd
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
