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
configured, the first backend that collects) leaves behind. Every backend decides the same
way: what its own state condemns (failed, ended, leftovers) goes; a session whose owner
process (an MCP server) is gone goes whatever its idle time, one whose owner runs stays;
otherwise a session goes once idle longer than --idle, else the backend's idle timeout
(docker.idle_timeout, modal.idle_timeout, daytona.auto_stop, 1h on kubernetes; singularity
and vercel have none and keep idle sessions without --idle), unless its last use is unknown
or it is busy. Each backend's idle clock is listed in the config package's documentation.
docker also removes warm-pool containers of processes that are gone and workspace volumes no
container uses; singularity, cached SIF files nothing uses; daytona stops (hibernates) idle
sandboxes, its files kept; vercel removes only stopped or failed sandboxes, snapshots kept. Session snapshots
(sessions snapshot) older than terminal.snapshot_ttl (default 7 days; 0 keeps them) go too.
A failed removal is reported and the others go on. A removed session starts fresh on its
next command, which reports environment_recreated.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.backendWith(cmd.Context(), "garbage collection", func(b sandbox.Backend) bool { _, ok := b.(sandbox.Collector); return ok })
			if err != nil {
				return err
			}
			defer b.Close()
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			rep, err := b.(sandbox.Collector).Collect(cmd.Context(), sandbox.GCOptions{IdleTimeout: idle, DryRun: dryRun,
				SnapshotTTL: cfg.Terminal.SnapshotTTL})
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
				if rep.Failed == nil {
					rep.Failed = []sandbox.GCItem{}
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
			for _, it := range rep.Failed {
				fmt.Fprintf(a.stdout, "failed to remove %s %s: %s\n", it.Kind, it.Name, it.Reason)
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
