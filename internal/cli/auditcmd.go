package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/config"
)

func (a *app) auditCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Create, read and verify the audit log (init, verify, tail, show)"}
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
	cmd.PersistentFlags().StringVar(&file, "file", "", "audit log (default audit.log_destination)")
	cmd.AddCommand(a.auditInitCmd(logPath, &file), a.auditVerifyCmd(logPath, &file), a.auditTailCmd(logPath), a.auditShowCmd(logPath))
	return cmd
}

func (a *app) auditInitCmd(logPath func() (string, error), fileFlag *string) *cobra.Command {
	var rotate bool
	init := &cobra.Command{
		Use:   "init [--rotate]",
		Short: "Create a sealed audit log and print its verification key, once",
		Long: `Creates a new audit log sealed with a forward-secure key, and prints the verification key
on the last line of stdout. The key is shown once and is written nowhere: store it away from this
machine. ` + "`audit verify --key KEY`" + ` needs it to prove that no record was edited, deleted,
reordered or cut off, and that the log was not replaced.

An existing log is never overwritten: --rotate closes it with a final record and seal, moves it
(with its sealing state) aside as LOG.<time>, and starts a new sealed log.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := logPath()
			if err != nil {
				return err
			}
			var opts audit.InitOptions
			opts.Rotate = rotate
			cfg, cfgErr := a.loadConfig()
			if !rotate && (cfgErr != nil || !cfg.Audit.Sealed || *fileFlag != "") && unsealedLog(p) {
				// The commands run before init wrote an unsealed log: init seals from here on
				// and keeps those records, archived beside the new log.
				opts.Rotate = true
				fmt.Fprintf(a.stdout, "An unsealed audit log from earlier commands exists at %s: it is archived beside the new sealed log.\n", p)
			}
			if cfgErr == nil && cfg.Audit.Sealed && *fileFlag == "" {
				if _, err := os.Stat(p + ".seal"); err != nil {
					// A sealed installation whose log or state is gone: the new log says so
					// in its first record, and the user hears it now.
					opts.Lost = fmt.Sprintf("the previous sealed log at %s had no sealing state (%v)", p, err)
					fmt.Fprintf(a.stderr, "hermes-sandbox: WARNING: this installation's audit log is sealed, but %s has no sealing state: "+
						"the log or its state was deleted or replaced. The new log records the loss in its first record.\n", p)
				}
			}
			res, err := audit.Init(p, opts)
			if err != nil {
				return err
			}
			// From now on a missing sealing state refuses calls instead of starting an unsealed
			// log (for the configured log; --file names another).
			if *fileFlag == "" {
				if err := config.Set(a.configPath(), "audit.sealed", "true"); err != nil {
					return fmt.Errorf("audit init: the log is sealed, but audit.sealed could not be set: %w", err)
				}
			}
			if res.Warning != "" {
				fmt.Fprintf(a.stderr, "hermes-sandbox: warning: %s\n", res.Warning)
			}
			switch {
			case res.Archived != "" && opts.Rotate && !rotate:
				fmt.Fprintf(a.stdout, "Archived the earlier unsealed log as %s\n", res.Archived)
			case res.Archived != "":
				fmt.Fprintf(a.stdout, "Archived the previous log, with its final seal, as %s\n", res.Archived)
			}
			fmt.Fprintf(a.stdout, "Created the sealed audit log %s (log id %s).\n", res.Path, res.LogID)
			fmt.Fprintln(a.stdout, "The verification key follows. It is shown ONCE and is not stored on this machine:")
			fmt.Fprintln(a.stdout, "keep it elsewhere (a password manager, another host). Verify the log with")
			fmt.Fprintf(a.stdout, "  %s=KEY hermes-sandbox audit verify\n", config.EnvAuditKey)
			fmt.Fprintln(a.stdout, res.Key)
			return nil
		},
	}
	init.Flags().BoolVar(&rotate, "rotate", false, "archive an existing log with its final seal and start a new one")
	return init
}

// auditVerifyCmd: file is --file; only the configured log is held to audit.sealed.
func (a *app) auditVerifyCmd(logPath func() (string, error), fileFlag *string) *cobra.Command {
	var asJSON bool
	var key, witness string
	verify := &cobra.Command{
		Use:   "verify [--key KEY] [--witness FILE] [--file PATH]",
		Short: "Check the log's hash chain, MACs and seal; exit 1 and name the first bad record if it was tampered with",
		Long: `Checks every record's hash and the chain between them. With the verification key that
` + "`audit init`" + ` printed (--key, or ` + config.EnvAuditKey + `), it also checks every record's MAC and the
seal over the record count, so it detects a truncated tail, a rewritten sealing state, re-chained
edits and a log replaced wholesale. Without the key it says what it cannot rule out.

--witness FILE cross-checks the records the system log witnessed (audit.witness): a syslog file
such as /var/log/auth.log, or "-" to read ` + "`journalctl -t hermes-sandbox -o cat`" + ` from stdin.

An intent without a result (a killed caller) is a warning, not a failure.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := logPath()
			if err != nil {
				return err
			}
			var opts audit.VerifyOptions
			if *fileFlag == "" {
				if cfg, err := a.loadConfig(); err == nil {
					opts.Sealed = cfg.Audit.Sealed
				}
			}
			if key == "" {
				key = a.getenv(config.EnvAuditKey)
			}
			if key != "" {
				if opts.Key, err = audit.ParseKey(key); err != nil {
					return usagef("audit verify: %v", err)
				}
			}
			if witness != "" {
				if opts.Witness, err = a.readWitness(witness); err != nil {
					return err
				}
			}
			rep, err := audit.VerifyWith(p, opts)
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
	verify.Flags().StringVar(&key, "key", "", "verification key printed by `audit init` (default $"+config.EnvAuditKey+")")
	verify.Flags().StringVar(&witness, "witness", "", `witness entries to cross-check: a syslog file, or "-" for stdin`)
	return verify
}

func (a *app) readWitness(name string) ([]audit.WitnessEntry, error) {
	var r io.Reader = a.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("audit verify --witness: %w", err)
		}
		defer f.Close()
		r = f
	}
	if r == nil {
		return nil, usagef("audit verify --witness -: no stdin")
	}
	return audit.ReadWitness(r)
}

func (a *app) auditTailCmd(logPath func() (string, error)) *cobra.Command {
	var n int
	var follow, asJSON bool
	tail := &cobra.Command{
		Use:   "tail [-n N] [-f]",
		Short: "Print the last records, each call's intent paired with its result (and follow new ones with -f)",
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
			a.printRecords(recs, asJSON)
			if follow {
				return audit.Follow(cmd.Context(), p, func(r audit.Record) {
					if asJSON {
						a.printJSON(r)
					} else if r.Type == audit.TypeResult {
						fmt.Fprintln(a.stdout, audit.FormatCall(audit.Call{Result: &r}))
					} else {
						fmt.Fprintln(a.stdout, audit.Format(r))
					}
				})
			}
			return nil
		},
	}
	tail.Flags().IntVarP(&n, "n", "n", 20, "number of records")
	tail.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new records")
	tail.Flags().BoolVar(&asJSON, "json", false, "print records as JSON lines")
	return tail
}

func (a *app) auditShowCmd(logPath func() (string, error)) *cobra.Command {
	var session, kind string
	var asJSON bool
	show := &cobra.Command{
		Use:   "show [--session NAME] [--kind call|egress|egress_policy]",
		Short: "Print every call of one session (each intent paired with its result), or the records of one kind",
		Long: `Prints the records of one session, of one kind, or both. Kinds: call (commands and file
operations, intent paired with result), egress (each outbound connection the egress proxy
allowed or denied, with host, port and bytes up/down), egress_policy (changes made with
` + "`hermes-sandbox sessions network`" + `).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if session == "" && kind == "" {
				return usagef("audit show: --session or --kind is required")
			}
			if kind != "" && !slices.Contains(audit.Kinds, kind) {
				return usagef("audit show: unknown --kind %q: want one of %s", kind, strings.Join(audit.Kinds, ", "))
			}
			p, err := logPath()
			if err != nil {
				return err
			}
			recs, err := audit.ReadAll(p)
			if err != nil {
				return err
			}
			if session != "" {
				recs = audit.FilterSession(recs, session)
			}
			if kind != "" {
				recs = audit.FilterKind(recs, kind)
			}
			if len(recs) == 0 && !asJSON {
				what := []string{}
				if session != "" {
					what = append(what, "session "+session)
				}
				if kind != "" {
					what = append(what, "kind "+kind)
				}
				fmt.Fprintf(a.stderr, "no records for %s in %s\n", strings.Join(what, " and "), p)
				return nil
			}
			a.printRecords(recs, asJSON)
			return nil
		},
	}
	show.Flags().StringVar(&session, "session", "", "session name")
	show.Flags().StringVar(&kind, "kind", "", "record kind: "+strings.Join(audit.Kinds, ", "))
	show.Flags().BoolVar(&asJSON, "json", false, "print records as JSON lines")
	return show
}

// printRecords prints records as JSON lines, or as one line per call.
func (a *app) printRecords(recs []audit.Record, asJSON bool) {
	if asJSON {
		for _, r := range recs {
			a.printJSON(r)
		}
		return
	}
	for _, c := range audit.Pair(recs) {
		fmt.Fprintln(a.stdout, audit.FormatCall(c))
	}
}

func (a *app) printJSON(r audit.Record) {
	b, _ := json.Marshal(r)
	fmt.Fprintln(a.stdout, string(b))
}

// unsealedLog reports whether path holds a non-empty audit log with no sealing state beside it.
func unsealedLog(path string) bool {
	st, err := os.Stat(path)
	if err != nil || st.Size() == 0 {
		return false
	}
	_, err = os.Stat(path + ".seal")
	return errors.Is(err, fs.ErrNotExist)
}
