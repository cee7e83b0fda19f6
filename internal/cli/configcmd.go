package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

// configPath is the config file this run reads and edits.
func (a *app) configPath() string {
	home := a.getenv("HOME")
	expand := func(p string) string {
		if p == "~" || len(p) > 1 && p[:2] == "~/" {
			return filepath.Join(home, p[1:])
		}
		return p
	}
	if a.configFlag != "" {
		return expand(a.configFlag)
	}
	if p := a.getenv(config.EnvConfigPath); p != "" {
		return expand(p)
	}
	if x := a.getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "hermes-sandbox", config.ConfigFileName)
	}
	return filepath.Join(home, ".config", "hermes-sandbox", config.ConfigFileName)
}

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Read and change settings (set, get, unset, list, path)",
		Long: `Settings live in one YAML file; credentials go to secrets.yaml beside it (mode 0600).
Keys are section.key, for example docker.image or terminal.timeout; 'sandbox' is an alias
of terminal.backend. Every key can also be set with HERMES_SANDBOX_<SECTION>_<KEY>.`,
	}
	set := &cobra.Command{
		Use:     "set KEY VALUE",
		Short:   "Set a key (validated before anything is written)",
		Example: "  hermes-sandbox config set sandbox docker\n  hermes-sandbox config set docker.memory_limit 1g",
		Args:    exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := a.configPath()
			if err := config.Set(p, args[0], args[1]); err != nil {
				return err
			}
			where := p
			if config.IsSecretKey(args[0]) {
				where = config.SecretsPathFor(p)
			}
			fmt.Fprintf(a.stderr, "set %s in %s\n", args[0], where)
			if n := config.SpellingNote(args[0], args[1]); n != "" {
				fmt.Fprintf(a.stderr, "note: %s\n", n)
			}
			a.warnOverridden(args[0])
			return nil
		},
	}
	get := &cobra.Command{
		Use:   "get KEY",
		Short: "Print a key's effective value (file, env and defaults applied; secrets masked)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			v, err := config.Get(cfg, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, v)
			return nil
		},
	}
	unset := &cobra.Command{
		Use:   "unset KEY",
		Short: "Remove a key from the file so its default applies",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := a.configPath()
			removed, err := config.UnsetKey(p, args[0])
			if err != nil {
				return err
			}
			where := p
			if config.IsSecretKey(args[0]) {
				where = config.SecretsPathFor(p)
			}
			if removed {
				fmt.Fprintf(a.stderr, "removed %s from %s; its default applies\n", args[0], where)
				a.warnOverridden(args[0])
			} else {
				fmt.Fprintf(a.stderr, "%s is not set in %s; nothing changed\n", args[0], where)
			}
			return nil
		},
	}
	var aliases, asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List every key with its effective value and where it came from",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if aliases {
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				for _, al := range config.Aliases() {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", al.Name, al.Key, al.Note)
				}
				return tw.Flush()
			}
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if asJSON {
				type entry struct {
					Key    string `json:"key"`
					Value  string `json:"value"` // as config get prints it; secrets masked
					Source string `json:"source"`
					Secret bool   `json:"secret,omitempty"`
				}
				out := []entry{}
				for _, kv := range config.List(cfg) {
					out = append(out, entry{kv.Key, kv.Value, string(kv.Source), kv.Secret})
				}
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			for _, kv := range config.List(cfg) {
				fmt.Fprintf(tw, "%s\t%s\t(%s)\n", kv.Key, kv.Value, kv.Source)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {key, value, source, secret}")
	list.Flags().BoolVar(&aliases, "aliases", false, "list the alternative key names (sandbox, Hermes's flat keys) and what each sets")
	path := &cobra.Command{
		Use:   "path",
		Short: "Print the config file path",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(a.stdout, a.configPath())
			return nil
		},
	}
	set.Flags().SetInterspersed(false)
	cmd.AddCommand(set, get, unset, list, path, a.importHermesCmd())
	return cmd
}

// exactArgs is cobra.ExactArgs with a usage error (exit 2).
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s: want %d argument(s), got %d (see --help)", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

// warnOverridden says when what was just written to the config file is not what is in effect,
// because the environment (HERMES_SANDBOX_*, Hermes's TERMINAL_* or ~/.hermes/.env) sets key.
func (a *app) warnOverridden(key string) {
	cfg, err := a.loadConfig()
	if err != nil || cfg.Source(key) != config.SourceEnv {
		return
	}
	v, _ := config.Get(cfg, key)
	fmt.Fprintf(a.stderr, "note: %s is also set by %s, which wins: the value in effect is %s (hermes-sandbox config list shows every source)\n",
		key, cfg.Origin(key), v)
}
