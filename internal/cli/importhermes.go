package cli

import (
	"bufio"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

func (a *app) importHermesCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "import-hermes [DIR]",
		Short: "Bring a Hermes Agent configuration over (~/.hermes/config.yaml and .env)",
		Long: `Reads a Hermes Agent directory (default $HERMES_HOME or ~/.hermes): config.yaml, including
the hardened terminal.docker.* template, and .env (TERMINAL_* variables, provider tokens).
It shows what it would change, then writes on confirmation: settings to the config file,
credentials to secrets.yaml. Hermes keys with no equivalent here are listed, never dropped
silently. Without a terminal, nothing is written unless --yes is given, and it exits 1 when
there were changes it did not write (0 when there is nothing to change).`,
		Example: "  hermes-sandbox config import-hermes\n  hermes-sandbox config import-hermes ~/old-box/.hermes --yes",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("config import-hermes: at most one directory")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := ""
			if len(args) == 1 {
				dir = args[0]
			}
			imp, err := config.ReadHermes(dir, a.environ)
			if err != nil {
				return err
			}
			path := a.configPath()
			current, err := config.LoadWith(config.Options{Path: path})
			if err != nil {
				return fmt.Errorf("the current configuration does not load, fix it first: %w", err)
			}
			fmt.Fprintf(a.stdout, "Read %s\n", strings.Join(imp.Read, ", "))
			var kvs []config.KV
			var notes []string
			for _, c := range imp.Changes(current) {
				if c.Note != "" {
					notes = append(notes, fmt.Sprintf("%s → %s %s: %s", c.From, c.Key, c.New, c.Note))
				}
				if !c.Changed {
					fmt.Fprintf(a.stdout, "  = %-28s %s (unchanged; %s)\n", c.Key, c.New, c.From)
					continue
				}
				kvs = append(kvs, config.KV{Key: c.Key, Value: c.Value})
			}
			// Import what can be imported: a setting the rest of the configuration rejects
			// (a cross-field rule) is set aside with the reason, the others are kept.
			kvs, rejected := importable(path, kvs)
			for _, c := range imp.Changes(current) {
				if c.Changed && slices.ContainsFunc(kvs, func(kv config.KV) bool { return kv.Key == c.Key }) {
					fmt.Fprintf(a.stdout, "  ~ %-28s %s → %s (%s)\n", c.Key, orNone(c.Old), c.New, c.From)
				}
			}
			for _, n := range notes {
				fmt.Fprintf(a.stdout, "Note: %s\n", n)
			}
			if len(imp.Failed) > 0 || len(rejected) > 0 {
				fmt.Fprintln(a.stdout, "Not imported (an equivalent exists, but this value cannot be used):")
				for _, f := range imp.Failed {
					fmt.Fprintf(a.stdout, "  ! %s → %s: %s\n", f.From, f.Key, f.Reason)
				}
				for _, r := range rejected {
					fmt.Fprintf(a.stdout, "  ! %s: %s\n", r.kv.Key, r.err)
				}
			}
			if len(imp.Ignored) > 0 {
				fmt.Fprintln(a.stdout, "Not imported (no equivalent in hermes-sandbox):")
				for _, k := range imp.Ignored {
					fmt.Fprintf(a.stdout, "  - %s\n", k)
				}
			}
			if len(kvs) == 0 {
				fmt.Fprintln(a.stdout, "Nothing to change.")
				return nil
			}
			if !yes {
				if !isTerminal(a.stdin) {
					fmt.Fprintf(a.stdout, "Nothing written (no terminal to confirm on); run again with --yes to write %s.\n", path)
					return exitError{1} // a script must notice that its import did not happen
				}
				fmt.Fprintf(a.stderr, "Write these %d settings to %s? [y/N]: ", len(kvs), path)
				line, _ := bufio.NewReader(a.stdin).ReadString('\n')
				if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(line)), "y") {
					fmt.Fprintln(a.stdout, "Nothing written.")
					return exitError{1}
				}
			}
			if err := config.SetMany(path, kvs); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "Wrote %d settings to %s (credentials to %s).\n", len(kvs), path, config.SecretsPathFor(path))
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "write without asking")
	return cmd
}

// rejectedKV is an imported setting the configuration would not accept, and why.
type rejectedKV struct {
	kv  config.KV
	err error
}

// importable keeps the settings that can be written together to the config at path: all of
// them when they validate as a whole, else each in turn that validates with those kept so far.
func importable(path string, kvs []config.KV) ([]config.KV, []rejectedKV) {
	if config.CheckMany(path, kvs) == nil {
		return kvs, nil
	}
	var kept []config.KV
	var rejected []rejectedKV
	for _, kv := range kvs {
		if err := config.CheckMany(path, append(slices.Clone(kept), kv)); err != nil {
			rejected = append(rejected, rejectedKV{kv, err})
			continue
		}
		kept = append(kept, kv)
	}
	return kept, rejected
}

func orNone(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}
