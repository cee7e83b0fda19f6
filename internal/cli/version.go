package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
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
					Commit   string   `json:"commit"`
					Go       string   `json:"go"`
					OS       string   `json:"os"`
					Arch     string   `json:"arch"`
					Backends []string `json:"backends"` // built into this binary
				}{Version, commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH, a.registry.Names()})
			}
			fmt.Fprint(a.stdout, versionLine())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {version, commit, go, os, arch, backends} as JSON")
	return cmd
}

// Commit is the source revision, set at build time with -ldflags "-X .../internal/cli.Commit=…"
// (make build and make dist do); empty means the one Go recorded, if any.
var Commit = ""

// commit is Commit, else the VCS revision Go stamped into the binary (12 digits, "+dirty"
// for a modified tree), else "unknown" (a build outside a repository, or with -buildvcs=false).
func commit() string {
	if Commit != "" {
		return Commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

// versionLine is what both `version` and `--version` print: version, commit, Go release and
// platform (os/arch).
func versionLine() string {
	return fmt.Sprintf("hermes-sandbox %s (commit %s, %s, %s/%s)\n", Version, commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// setVersionFlag makes `hermes-sandbox --version` print what `version` does. The flag is
// declared here so that cobra adds no -v shorthand of its own.
func setVersionFlag(root *cobra.Command) {
	root.Version = Version
	root.SetVersionTemplate(strings.ReplaceAll(versionLine(), "{{", "{{`{{`}}"))
	root.Flags().Bool("version", false, "print the version (as the version command does)")
}
