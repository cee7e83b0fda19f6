package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

// maxSecretLen bounds a value read from stdin (a token, not a file).
const maxSecretLen = 64 << 10

// secretsCmd is `secrets add|list|rm`: credentials the egress proxy adds to requests for
// their hosts (secrets.broker), so a sandbox only ever holds a placeholder. A value is read
// from stdin or a no-echo prompt, never from argv (where `ps` and shell history see it).
func (a *app) secretsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Credentials added at the egress proxy: the sandbox only sees a placeholder",
		Long: `A brokered secret never enters a sandbox. The sandbox's variable NAME holds a random
placeholder, unique to the session; the egress proxy replaces it with the real value in request
headers (and HTTP basic auth) only on connections to the secret's hosts, terminating TLS for those
hosts with a per-session CA the sandbox trusts. Sent anywhere else, the placeholder goes out
unchanged and the audit log records a possible exfiltration. Works where the egress proxy runs:
docker with docker.network allowlist, local with local.network allowlist, kubernetes with
kubernetes.network allowlist. Adding or removing a secret applies to running sessions from their
next connection.

  printf %s "$GITHUB_TOKEN" | hermes-sandbox secrets add GITHUB_TOKEN --host github.com --host api.github.com`,
	}
	cmd.AddCommand(a.secretsAddCmd(), a.secretsListCmd(), a.secretsRmCmd())
	return cmd
}

func (a *app) secretsAddCmd() *cobra.Command {
	var e config.BrokerSecret
	cmd := &cobra.Command{
		Use:   "add NAME --host HOST [--host HOST]...",
		Short: "Store a secret (value from stdin, or a prompt on a terminal) and the hosts that get it",
		Long: `Stores NAME in secrets.broker of the config file and its value in secrets.yaml beside it
(mode 0600). The value is read from stdin (one trailing newline is dropped), or asked for without
echo when stdin is a terminal; it is never taken from the command line. With --value-from env
nothing is stored: the value is read from this tool's environment variable NAME at each session.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e.Name = args[0]
			value := ""
			if e.ValueFrom != config.ValueFromEnv {
				v, err := a.readSecretValue(e.Name)
				if err != nil {
					return err
				}
				value = v
			}
			if err := config.AddBrokerSecret(a.configPath(), e, value); err != nil {
				return err
			}
			where := "value in " + config.SecretsPathFor(a.configPath())
			if value == "" {
				where = "value from the environment variable " + e.Name
			}
			fmt.Fprintf(a.stdout, "secret %s stored for %s (%s)\n", e.Name, strings.Join(e.Hosts, ", "), where)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&e.Hosts, "host", nil, "a host that gets the real value (NAME or *.NAME; repeat for more)")
	f.StringVar(&e.ValueFrom, "value-from", "", "secrets.yaml (default: store the value read from stdin) or env")
	f.StringVar(&e.Header, "header", "", "the request header the proxy sets (default Authorization)")
	f.StringVar(&e.Format, "format", "", `the header's value, %s standing for the secret (default "Bearer %s")`)
	f.StringVar(&e.BasicAuthUser, "basic-auth-user", "", "also accept the placeholder as a basic-auth password and send this user (git over HTTPS)")
	return cmd
}

// readSecretValue reads a secret from stdin: without echo on a terminal, else all of it.
func (a *app) readSecretValue(name string) (string, error) {
	var raw []byte
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(a.stderr, "value of %s (not echoed): ", name)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		if err != nil {
			return "", fmt.Errorf("secrets add: read the value: %w", err)
		}
		raw = b
	} else {
		if a.stdin == nil {
			return "", usagef("secrets add: no value: pipe it in, e.g. printf %%s \"$%s\" | hermes-sandbox secrets add %s --host HOST", name, name)
		}
		b, err := io.ReadAll(io.LimitReader(a.stdin, maxSecretLen+1))
		if err != nil {
			return "", fmt.Errorf("secrets add: read the value from stdin: %w", err)
		}
		if len(b) > maxSecretLen {
			return "", usagef("secrets add: the value on stdin is longer than %d bytes; a token is expected", maxSecretLen)
		}
		raw = b
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	if v == "" {
		return "", usagef("secrets add: the value is empty: pipe it in, e.g. printf %%s \"$%s\" | hermes-sandbox secrets add %s --host HOST", name, name)
	}
	// The value goes into a request header: a line break would let it add headers of its own.
	if strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) }) >= 0 {
		return "", usagef("secrets add: the value contains a line break or another control character; a header value cannot hold one")
	}
	return v, nil
}

func (a *app) secretsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List brokered secrets: names and hosts, never values",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if len(cfg.Secrets.Broker) == 0 {
				io.WriteString(a.stdout, "no brokered secrets (add one: printf %s \"$TOKEN\" | hermes-sandbox secrets add NAME --host HOST)\n")
				return nil
			}
			for _, s := range cfg.Secrets.Broker {
				r := s.Resolved()
				state := "value stored"
				if _, err := cfg.BrokerValue(r, a.environ); err != nil {
					state = "value missing"
				}
				if r.ValueFrom == config.ValueFromEnv {
					state = "value from env, " + strings.TrimPrefix(state, "value ")
				}
				extra := ""
				if r.BasicAuthUser != "" {
					extra = ", basic auth as " + r.BasicAuthUser
				}
				fmt.Fprintf(a.stdout, "%s\thosts: %s\theader: %s%s\t(%s)\n", r.Name, strings.Join(r.Hosts, ", "), r.Header, extra, state)
			}
			return nil
		},
	}
}

func (a *app) secretsRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a brokered secret and its stored value",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			found, err := config.RemoveBrokerSecret(a.configPath(), args[0])
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("secrets rm: no secret named %s (hermes-sandbox secrets list)", args[0])
			}
			fmt.Fprintf(a.stdout, "secret %s removed\n", args[0])
			return nil
		},
	}
}
