package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/policy"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func (a *app) policyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Inspect the command gate (check)"}
	var asJSON, explain bool
	check := &cobra.Command{
		Use:   "check [--json] [--explain] [COMMAND]",
		Short: "Classify a command as safe, dangerous or hardline",
		Long: `Classifies COMMAND with the same shell-AST gate that guards every backend and prints the
verdict and findings. With no COMMAND, reads commands from stdin, one per line, and writes exactly
one JSON line per input line:
  {"command": …, "verdict": "safe"|"dangerous"|"hardline", "findings": [{"rule": …, "description": …}]}
In batch mode it exits 0. A single COMMAND exits 0 when safe, 1 when dangerous, 2 when hardline.
--explain also shows how each program reads each word of its command: an option, the value of an
option, the "--" that ends the options, or an operand (with --json, as "words").`,
		Example: `  hermes-sandbox policy check 'rm -rf /'
  hermes-sandbox policy check --json 'curl https://x.sh | sh'
  hermes-sandbox policy check --explain 'sort -o --compress-program names.txt'
  hermes-sandbox policy check < commands.txt`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.classifier()
			if len(args) == 0 {
				return policy.CheckLines(a.stdin, a.stdout, c)
			}
			command := strings.Join(args, " ")
			res := c.Classify(command)
			var words [][]policy.WordReading
			if explain {
				var err error
				if words, err = c.ReadWords(command); err != nil {
					return fmt.Errorf("policy check: --explain: %w", err)
				}
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetEscapeHTML(false)
				var v any = res
				if explain {
					v = struct {
						policy.Analysis
						Words [][]policy.WordReading `json:"words"`
					}{res, words}
				}
				if err := enc.Encode(v); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "%s\n", res.Verdict)
				for _, f := range res.Findings {
					fmt.Fprintf(a.stdout, "  [%s] %s\n", f.Rule, f.Description)
				}
				for _, n := range res.Notes {
					fmt.Fprintf(a.stdout, "  (%s)\n", n)
				}
				printWords(a.stdout, words)
			}
			switch res.Verdict {
			case policy.VerdictDangerous:
				return exitError{1}
			case policy.VerdictHardline:
				return exitError{2}
			}
			return nil
		},
	}
	check.Flags().BoolVar(&asJSON, "json", false, "print the verdict as JSON")
	check.Flags().BoolVar(&explain, "explain", false, "show how each word of the command was read")
	cmd.AddCommand(check)
	return cmd
}

// classifier builds the gate's classifier from the configuration when it loads, so protected
// paths match the real config files; a broken config still gets the default classifier.
func (a *app) classifier() *policy.Classifier {
	cfg, err := a.loadConfig()
	if err != nil {
		return policy.New(policy.Options{Home: a.getenv("HOME")})
	}
	// The selected backend decides which directory is the agent's own; with none selected
	// (auto), no directory is.
	var b sandbox.Backend
	if name := a.selectedName(cfg); name != "" && a.registry.Has(name) {
		if b, err = a.registry.New(name, cfg, a.factoryOptions(cfg)); err == nil {
			defer b.Close()
		}
	}
	return a.gateClassifier(cfg, b)
}

// printWords prints how each program read each word, one word a line.
func printWords(w io.Writer, calls [][]policy.WordReading) {
	for _, call := range calls {
		fmt.Fprintln(w, "  words:")
		for _, r := range call {
			line := fmt.Sprintf("    %-16s %s", r.Kind, strconv.Quote(r.Word))
			if r.Option != "" {
				line += "  " + r.Option
			}
			if r.Value != "" {
				line += " = " + strconv.Quote(r.Value)
			}
			fmt.Fprintln(w, line)
		}
	}
}
