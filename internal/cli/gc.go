package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func (a *app) gcCmd() *cobra.Command {
	var dryRun, asJSON bool
	var idle time.Duration
	cmd := &cobra.Command{
		Use:   "gc [--idle DURATION] [--dry-run] [--json]",
		Short: "Remove idle sandboxes and leftovers of the selected backend",
		Long: `Reaps what the selected backend (--sandbox, else the configured one; with nothing
configured, the first backend that collects) leaves behind. docker: this state directory's
session containers idle longer than docker.idle_timeout (default 30m) that run nothing beyond
their init, session containers whose owner is gone whatever their idle time (an MCP server,
killed before it could remove its sessions), warm-pool containers left by processes that are gone, and workspace volumes no
container uses. singularity: instances idle longer than --idle with no helper attached and no
background job (their workspaces stay), and cached SIF files nothing uses. vercel: this
owner's tagged sandboxes that failed or stayed stopped longer than --idle (default 24h); their
snapshots stay. A removed session
starts fresh on its next command, which reports environment_recreated.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.backendWith(cmd.Context(), "garbage collection", func(b sandbox.Backend) bool { _, ok := b.(sandbox.Collector); return ok })
			if err != nil {
				return err
			}
			defer b.Close()
			rep, err := b.(sandbox.Collector).Collect(cmd.Context(), sandbox.GCOptions{IdleTimeout: idle, DryRun: dryRun})
			if !dryRun && len(rep.Removed) > 0 {
				a.forgetInOwners(b.Name(), "")
			}
			if asJSON {
				if rep.Removed == nil {
					rep.Removed = []sandbox.GCItem{}
				}
				if rep.Kept == nil {
					rep.Kept = []sandbox.GCItem{}
				}
				if jerr := json.NewEncoder(a.stdout).Encode(rep); jerr != nil {
					return jerr
				}
				return err
			}
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			for _, it := range rep.Removed {
				fmt.Fprintf(a.stdout, "%s %s %s: %s\n", verb, it.Kind, it.Name, it.Reason)
			}
			for _, it := range rep.Kept {
				fmt.Fprintf(a.stdout, "kept %s %s: %s\n", it.Kind, it.Name, it.Reason)
			}
			if len(rep.Removed) == 0 {
				fmt.Fprintf(a.stdout, "%s: nothing to remove\n", b.Name())
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be removed, remove nothing")
	cmd.Flags().DurationVar(&idle, "idle", 0, "remove sessions idle longer than this (default: the backend's configured idle timeout)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
