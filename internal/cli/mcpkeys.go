package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
)

// mcpKeysCmd is `mcp keys`: the access keys of a server shared by a team.
func (a *app) mcpKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage the access keys of an MCP server shared by a team (add, list, revoke)",
		Long: `Each person or agent gets its own key, with its own scopes and limits; the audit log and the
metrics name the key of every call. Only an argon2id hash of each key is stored, in ` + mcpserver.KeysFileName + `
(mode 0600) beside the config file. Once any key exists, every HTTP request to ` + "`mcp --http`" + ` needs a
key, or the admin token $` + mcpserver.TokenEnv + `, loopback included. A running server picks up added and
revoked keys without a restart.`,
	}
	cmd.AddCommand(a.mcpKeysAddCmd(), a.mcpKeysListCmd(), a.mcpKeysRevokeCmd())
	return cmd
}

func (a *app) mcpKeysAddCmd() *cobra.Command {
	var k mcpserver.Key
	var rate, expires string
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Create a key; it is printed once, alone on the last line",
		Example: `  hermes-sandbox mcp keys add ci --backends docker --tools terminal,read_file --approvals deny \
      --max-sessions 4 --max-concurrent 2 --rate 60/min --expires 30d`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k.Name = args[0]
			now := time.Now()
			if rate != "" {
				n, err := parseRate(rate)
				if err != nil {
					return usageError{err}
				}
				k.RatePerMinute = n
			}
			if expires != "" {
				d, err := parseDays(expires)
				if err != nil {
					return usageError{err}
				}
				k.Expires = now.Add(d).UTC().Truncate(time.Second)
			}
			path := mcpserver.KeysPath(a.configPath())
			key, err := mcpserver.AddKey(path, k, now)
			if err != nil {
				return usageError{fmt.Errorf("mcp keys add: %w", err)}
			}
			fmt.Fprintf(a.stdout, "Created key %q (stored as a hash in %s). It is shown only now; send it as\n"+
				"Authorization: Bearer <key>:\n%s\n", k.Name, path, key)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&k.Backends, "backends", nil, "backends the key may use (default all)")
	fl.StringSliceVar(&k.Tools, "tools", nil, "tools the key may call: "+strings.Join(mcpserver.ToolNames, ",")+" (default all)")
	fl.StringVar(&k.Approvals, "approvals", "", "ask: approvals.mode decides (default); deny: refuse every command that needs approval")
	fl.IntVar(&k.MaxSessions, "max-sessions", 0, "MCP sessions the key may hold open at once (0 = mcp.max_sessions only)")
	fl.IntVar(&k.MaxConcurrent, "max-concurrent", 0, "tool calls the key may run at once (0 = no limit)")
	fl.StringVar(&rate, "rate", "", "tool calls a minute, as N/min (bursts of N, refilled evenly)")
	fl.StringVar(&expires, "expires", "", "the key stops working after this long: 30d, 12h (default never)")
	return cmd
}

// parseRate reads N/min (or a bare N, a minute implied).
func parseRate(s string) (int, error) {
	n, unit, _ := strings.Cut(s, "/")
	v, err := strconv.Atoi(n)
	if err != nil || v < 1 || unit != "" && unit != "min" && unit != "m" {
		return 0, fmt.Errorf("--rate %q: want calls per minute, e.g. 60/min", s)
	}
	return v, nil
}

// parseDays reads a Go duration or a number of days (30d).
func parseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if v, err := strconv.Atoi(n); err == nil && v > 0 {
			return time.Duration(v) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("--expires %q: want a positive duration, e.g. 30d or 12h", s)
}

func (a *app) mcpKeysListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the keys: name, scopes, limits, expiry and last use (never the key)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := mcpserver.KeysPath(a.configPath())
			keys, err := mcpserver.ReadKeys(path)
			if err != nil {
				return err
			}
			if len(keys) == 0 {
				fmt.Fprintf(a.stdout, "No keys (%s). `hermes-sandbox mcp keys add NAME` creates one.\n", path)
				return nil
			}
			used := mcpserver.LastUse(path)
			tw := tabwriter.NewWriter(a.stdout, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tBACKENDS\tTOOLS\tAPPROVALS\tSESSIONS\tCONCURRENT\tRATE\tEXPIRES\tLAST USE")
			now := time.Now()
			for _, k := range keys {
				exp := "never"
				if !k.Expires.IsZero() {
					exp = k.Expires.Format(time.RFC3339)
					if k.Expired(now) {
						exp += " (expired)"
					}
				}
				last := "never"
				if t, ok := used[k.Name]; ok {
					last = t.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, orAll(k.Backends), orAll(k.Tools),
					orDefault(k.Approvals, mcpserver.KeyApprovalsAsk), limit(k.MaxSessions), limit(k.MaxConcurrent),
					rateText(k.RatePerMinute), exp, last)
			}
			return tw.Flush()
		},
	}
}

func orAll(l []string) string {
	if len(l) == 0 {
		return "all"
	}
	return strings.Join(l, ",")
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func limit(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func rateText(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n) + "/min"
}

func (a *app) mcpKeysRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Delete a key: its next request is refused, and a running server closes its sessions and removes their sandboxes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mcpserver.RevokeKey(mcpserver.KeysPath(a.configPath()), args[0]); err != nil {
				return usageError{fmt.Errorf("mcp keys revoke: %w", err)}
			}
			fmt.Fprintf(a.stdout, "Revoked key %q.\n", args[0])
			return nil
		},
	}
}
