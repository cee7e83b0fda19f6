package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// sessionNetworker is implemented by backends whose live sessions have an egress allowlist
// that can change (docker with docker.network allowlist, kubernetes with kubernetes.network
// allowlist).
type sessionNetworker interface {
	SetSessionEgress(ctx context.Context, session string, allow, deny []string) ([]string, error)
}

// sessionsNetworkCmd is `sessions network NAME --allow HOST [--deny HOST]`. It is a person's
// command: the policy gate classifies it as hardline when an agent runs it, and MCP has no
// tool for it. Each change is an egress_policy audit record, written before the change.
func (a *app) sessionsNetworkCmd() *cobra.Command {
	var allow, deny []string
	cmd := &cobra.Command{
		Use:   "network NAME [--allow HOST]... [--deny HOST]...",
		Short: "Change a live session's egress allowlist (a person's command; agents cannot run it)",
		Long: `Adds hosts to (--allow) or removes them from (--deny) the egress allowlist of one session of
the docker backend with docker.network allowlist, or the kubernetes backend with kubernetes.network
allowlist. Entries are written as in docker.egress_allow and kubernetes.egress_allow:
NAME, *.NAME, NAME:PORT. The change applies to the session's next connection and lasts as long
as the session; --deny also removes a host the configuration lists. Without flags it prints the
allowlist in force. Every change is recorded in the audit log (audit show --kind egress_policy).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			b, err := a.openBackend(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer b.Close()
			n, ok := b.(sessionNetworker)
			if !ok {
				return fmt.Errorf("sessions network: the %s backend has no per-session egress allowlist (egress %s): %w",
					b.Name(), egressReport(b).Status, sandbox.ErrUnsupported)
			}
			change := len(allow)+len(deny) > 0
			var sink audit.Sink
			var rec audit.Record
			if change && cfg.Audit.Enabled && cfg.Audit.Level != config.AuditOff {
				log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
				sink = a.openAudit(cfg, a.expandHome(cfg.Audit.LogDestination), log)
				rec = audit.Record{Type: audit.TypeEgressPolicy, Tool: audit.ToolEgress, Session: name, Backend: b.Name(),
					Command: networkCommand(name, allow, deny), Decision: audit.DecisionAllowed, Approver: "cli", Transport: "cli"}
				ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
				err := sink.Append(ctx, rec)
				cancel()
				if err != nil {
					return fmt.Errorf("sessions network: not changed, the audit log refused the record: %w", err)
				}
			}
			now, err := n.SetSessionEgress(cmd.Context(), name, allow, deny)
			if err != nil {
				if sink != nil {
					rec.Decision, rec.Error = audit.DecisionRefused, err.Error()
					sink.Append(context.WithoutCancel(cmd.Context()), rec)
				}
				return err
			}
			if len(now) == 0 {
				fmt.Fprintf(a.stdout, "egress allowlist of %s: empty (nothing is reachable)\n", name)
				return nil
			}
			fmt.Fprintf(a.stdout, "egress allowlist of %s: %s\n", name, strings.Join(now, ", "))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&allow, "allow", nil, "host to allow: NAME, *.NAME or NAME:PORT (repeatable)")
	cmd.Flags().StringArrayVar(&deny, "deny", nil, "host to refuse from now on (repeatable)")
	return cmd
}

func networkCommand(name string, allow, deny []string) string {
	var b strings.Builder
	b.WriteString("sessions network " + name)
	for _, h := range allow {
		b.WriteString(" --allow " + h)
	}
	for _, h := range deny {
		b.WriteString(" --deny " + h)
	}
	return b.String()
}
