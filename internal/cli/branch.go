package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Branching subcommands of `sessions`: snapshot, snapshots, restore, fork, snapshot rm. Every
// call goes through the gate (approved and audited as the session's call), like exec.

// withBrancher runs fn with the selected backend behind the gate, as a sandbox.Brancher, and
// the caller's approver on the context.
func (a *app) withBrancher(cmd *cobra.Command, fn func(ctx context.Context, br sandbox.Brancher, b sandbox.Backend) error) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	b, err := a.openGuarded(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	ctx := gate.WithCaller(cmd.Context(), gate.Caller{Client: "hermes-sandbox", Transport: "cli"})
	if ap, closeTTY := a.approver(); ap != nil {
		defer closeTTY()
		ctx = gate.WithApprover(ctx, ap)
	}
	return fn(ctx, b.(sandbox.Brancher), b)
}

// snapshotter is the snapshot of backends that predate sandbox.Brancher (a filesystem
// snapshot kept with the session, without restore or fork).
type snapshotter interface {
	Snapshot(ctx context.Context, session string) (string, error)
}

func (a *app) sessionsSnapshotCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "snapshot NAME | snapshot rm ID...",
		Short: "Snapshot a session (files, cd and export state); its id is the last line printed",
		Long: `Stores the session's files (on docker: its root filesystem changes and its /workspace) and its
shell state (working directory, exported variables) as a snapshot, while the session keeps
running. Running processes and background jobs are not part of it. The snapshot's id is
printed alone on the last line (--json prints its details). A session made from it with
` + "`sessions restore ID --as NEW`" + ` starts where the session was; ` + "`sessions snapshots`" + ` lists them,
` + "`sessions snapshot rm ID`" + ` removes one, and ` + "`gc`" + ` removes those older than terminal.snapshot_ttl.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBrancher(cmd, func(ctx context.Context, br sandbox.Brancher, b sandbox.Backend) error {
				ref, err := br.Snapshot(ctx, args[0])
				if errors.Is(err, sandbox.ErrUnsupported) {
					if ok, err := a.legacySnapshot(cmd, args[0]); ok {
						return err
					}
				}
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(a.stdout).Encode(ref)
				}
				fmt.Fprintf(a.stdout, "snapshot of %s: %s\n%s\n", ref.Session, ref.ID, ref.ID)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the snapshot's details as JSON")
	rm := &cobra.Command{
		Use:   "rm ID...",
		Short: "Remove snapshots (sessions restored from them keep working)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBrancher(cmd, func(ctx context.Context, br sandbox.Brancher, b sandbox.Backend) error {
				var firstErr error
				for _, id := range args {
					if err := br.RemoveSnapshot(ctx, id); err != nil {
						fmt.Fprintf(a.stderr, "hermes-sandbox: %v\n", err)
						if firstErr == nil {
							firstErr = exitError{1}
						}
						continue
					}
					fmt.Fprintf(a.stdout, "removed snapshot %s\n", id)
				}
				return firstErr
			})
		},
	}
	cmd.AddCommand(rm)
	return cmd
}

// legacySnapshot takes a snapshot the old way on a backend without sandbox.Brancher that has
// one; ok is false when it has none either.
func (a *app) legacySnapshot(cmd *cobra.Command, name string) (bool, error) {
	m, done, err := a.sessionManager(cmd)
	if err != nil {
		return false, nil
	}
	defer done()
	sn, ok := m.(snapshotter)
	if !ok {
		return false, nil
	}
	id, err := sn.Snapshot(cmd.Context(), name)
	if err != nil {
		return true, err
	}
	fmt.Fprintf(a.stdout, "snapshot of %s: %s\n%s\n", name, id, id)
	return true, nil
}

func (a *app) sessionsSnapshotsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "snapshots",
		Short: "List the backend's session snapshots, with size and age",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBrancher(cmd, func(ctx context.Context, br sandbox.Brancher, b sandbox.Backend) error {
				list, err := br.Snapshots(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					if list == nil {
						list = []sandbox.SnapshotRef{}
					}
					return json.NewEncoder(a.stdout).Encode(list)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSESSION\tSIZE\tAGE")
				for _, s := range list {
					size, age := "-", "-"
					if s.Size > 0 {
						size = humanBytes(s.Size)
					}
					if !s.Created.IsZero() {
						age = time.Since(s.Created).Round(time.Second).String()
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.ID, s.Session, size, age)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) sessionsRestoreCmd() *cobra.Command {
	var as string
	cmd := &cobra.Command{
		Use:   "restore SNAPSHOT --as NEW",
		Short: "Make a new session from a snapshot",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if as == "" {
				return usagef("sessions restore: name the new session with --as NEW")
			}
			return a.withBrancher(cmd, func(ctx context.Context, br sandbox.Brancher, b sandbox.Backend) error {
				if err := br.Restore(ctx, args[0], as); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "restored %s as %s\n", args[0], as)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "name of the new session (required; must not exist)")
	return cmd
}

func (a *app) sessionsForkCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "fork NAME NEW",
		Short: "Copy a session (files, cd and export state) into a new session; NAME keeps running",
		Long: `Makes NEW a copy of session NAME as it is now: its files and its shell state. NAME keeps
running, and nothing either does afterwards reaches the other. Running processes and background
jobs are not copied. Try things in parallel from one starting point:

  hermes-sandbox sessions fork main try-a && hermes-sandbox sessions fork main try-b
  hermes-sandbox exec --session try-a -- make migrate-v2 &
  hermes-sandbox exec --session try-b -- make migrate-v3 &`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBrancher(cmd, func(ctx context.Context, br sandbox.Brancher, b sandbox.Backend) error {
				if err := br.Fork(ctx, args[0], args[1]); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "forked %s as %s\n", args[0], args[1])
				return nil
			})
		},
	}
}

// humanBytes is n in B, KiB, MiB or GiB, one decimal.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 2; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMG"[exp])
}
