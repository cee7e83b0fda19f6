package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func (a *app) sessionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sessions", Short: "List, remove, snapshot, restore and fork sessions, and change a live session's egress (list, rm, snapshot, snapshots, restore, fork, network)"}
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
				state := s.State
				if s.Mode != "" {
					state += " (" + s.Mode + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Backend, state, s.Cwd, used)
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
				a.forgetInOwners(m.(sandbox.Backend).Name(), n)
				fmt.Fprintf(a.stdout, "removed %s\n", n)
			}
			return firstErr
		},
	}
	rm.Flags().BoolVar(&rmAll, "all", false, "remove every session of the backend")
	cmd.AddCommand(list, rm, a.sessionsSnapshotCmd(), a.sessionsSnapshotsCmd(), a.sessionsRestoreCmd(),
		a.sessionsForkCmd(), a.sessionsNetworkCmd())
	return cmd
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
