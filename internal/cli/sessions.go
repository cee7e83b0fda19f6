package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func (a *app) sessionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sessions", Short: "List, remove and snapshot sessions (list, rm NAME, rm --all, snapshot NAME)"}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the backend's sessions",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, done, err := a.sessionManager(cmd)
			if err != nil {
				return err
			}
			defer done()
			infos, err := m.Sessions(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if infos == nil {
					infos = []sandbox.SessionInfo{}
				}
				return json.NewEncoder(a.stdout).Encode(infos)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tBACKEND\tSTATE\tCWD\tLAST USED")
			for _, s := range infos {
				used := "-"
				if !s.Used.IsZero() {
					used = time.Since(s.Used).Round(time.Second).String() + " ago"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Backend, s.State, s.Cwd, used)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	var rmAll bool
	rm := &cobra.Command{
		Use:   "rm (NAME... | --all)",
		Short: "Remove sessions: their sandbox, background jobs and state",
		RunE: func(cmd *cobra.Command, args []string) error {
			if rmAll == (len(args) > 0) {
				return usagef("sessions rm: give session names or --all")
			}
			m, done, err := a.sessionManager(cmd)
			if err != nil {
				return err
			}
			defer done()
			names := args
			if rmAll {
				infos, err := m.Sessions(cmd.Context())
				if err != nil {
					return err
				}
				for _, s := range infos {
					names = append(names, s.Name)
				}
			}
			var firstErr error
			for _, n := range names {
				if err := m.Remove(cmd.Context(), n); err != nil {
					fmt.Fprintf(a.stderr, "hermes-sandbox: %v\n", err)
					if firstErr == nil {
						firstErr = exitError{1}
					}
					continue
				}
				fmt.Fprintf(a.stdout, "removed %s\n", n)
			}
			return firstErr
		},
	}
	rm.Flags().BoolVar(&rmAll, "all", false, "remove every session of the backend")
	snap := &cobra.Command{
		Use:   "snapshot NAME",
		Short: "Save a session's sandbox filesystem as a snapshot (backends that have them)",
		Long: `Saves the session's sandbox filesystem as a snapshot with the backend's own API. Taking a
snapshot stops the sandbox (the next command resumes it), so it happens only on request. The
snapshot is recorded, and a sandbox that is later lost is restored from it.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			b, err := a.openBackend(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer b.Close()
			s, ok := b.(snapshotter)
			if !ok {
				return fmt.Errorf("the %s backend cannot snapshot sessions: %w", b.Name(), sandbox.ErrUnsupported)
			}
			id, err := s.Snapshot(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "snapshot %s of %s\n", id, args[0])
			return nil
		},
	}
	cmd.AddCommand(list, rm, snap)
	return cmd
}

// snapshotter is implemented by backends that save a session's filesystem on request.
type snapshotter interface {
	Snapshot(ctx context.Context, session string) (id string, err error)
}

func (a *app) sessionManager(cmd *cobra.Command) (sandbox.SessionManager, func(), error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	b, err := a.openBackend(cmd.Context(), cfg)
	if err != nil {
		return nil, nil, err
	}
	m, ok := b.(sandbox.SessionManager)
	if !ok {
		b.Close()
		return nil, nil, fmt.Errorf("the %s backend cannot list or remove sessions: %w", b.Name(), sandbox.ErrUnsupported)
	}
	return m, func() { b.Close() }, nil
}
