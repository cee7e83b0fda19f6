package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
)

func (a *app) auditCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Read and verify the audit log (verify, tail, show)"}
	var file string
	logPath := func() (string, error) {
		if file != "" {
			return a.expandHome(file), nil
		}
		cfg, err := a.loadConfig()
		if err != nil {
			return "", err
		}
		return a.expandHome(cfg.Audit.LogDestination), nil
	}
	cmd.PersistentFlags().StringVar(&file, "file", "", "audit log to read (default audit.log_destination)")
	var asJSON bool
	verify := &cobra.Command{
		Use:   "verify [--file PATH]",
		Short: "Check the hash chain; exit non-zero and name the first bad record if it was tampered with",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := logPath()
			if err != nil {
				return err
			}
			rep, err := audit.Verify(p)
			if err != nil {
				return err
			}
			if asJSON {
				if err := json.NewEncoder(a.stdout).Encode(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "%s: %s\n", p, rep.String())
			}
			if !rep.OK {
				return exitError{1}
			}
			return nil
		},
	}
	verify.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	var n int
	var follow bool
	tail := &cobra.Command{
		Use:   "tail [-n N] [-f]",
		Short: "Print the last records (and follow new ones with -f)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := logPath()
			if err != nil {
				return err
			}
			recs, err := audit.Tail(p, n)
			if err != nil {
				return err
			}
			for _, r := range recs {
				a.printRecord(r, asJSON)
			}
			if follow {
				return audit.Follow(cmd.Context(), p, func(r audit.Record) { a.printRecord(r, asJSON) })
			}
			return nil
		},
	}
	tail.Flags().IntVarP(&n, "n", "n", 20, "number of records")
	tail.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new records")
	tail.Flags().BoolVar(&asJSON, "json", false, "print records as JSON lines")
	var session string
	show := &cobra.Command{
		Use:   "show --session NAME",
		Short: "Print every record of one session",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if session == "" {
				return usagef("audit show: --session is required")
			}
			p, err := logPath()
			if err != nil {
				return err
			}
			recs, err := audit.ReadAll(p)
			if err != nil {
				return err
			}
			for _, r := range audit.FilterSession(recs, session) {
				a.printRecord(r, asJSON)
			}
			return nil
		},
	}
	show.Flags().StringVar(&session, "session", "", "session name")
	show.Flags().BoolVar(&asJSON, "json", false, "print records as JSON lines")
	cmd.AddCommand(verify, tail, show)
	return cmd
}

func (a *app) printRecord(r audit.Record, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(a.stdout, string(b))
		return
	}
	fmt.Fprintln(a.stdout, audit.Format(r))
}
