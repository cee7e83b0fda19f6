package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// backendReport is one line of `doctor`.
type backendReport struct {
	Backend  string   `json:"backend"`
	Usable   bool     `json:"usable"`
	Problem  string   `json:"problem,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	Selected bool     `json:"selected"`
	// Detail says where credentials come from and what is reached, for backends that tell.
	Detail string `json:"detail,omitempty"`
	// Confinement says whether the kernel keeps commands away from this tool's files.
	Confinement string `json:"confinement,omitempty"`
	// Egress says what the backend enforces about outbound connections.
	Egress *sandbox.EgressReport `json:"egress,omitempty"`
	// Secrets says whether secrets.broker works with this backend's settings.
	Secrets string `json:"secrets,omitempty"`
}

// secretBroker is implemented by backends whose egress proxy can broker secrets
// (secrets.broker); the others refuse brokered secrets.
type secretBroker interface{ BrokersSecrets() (bool, string) }

// describer is implemented by backends that can say where their credentials and endpoint
// come from.
type describer interface{ Describe() string }

func (a *app) doctorCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Report which backends work on this machine, and why not",
		Long: `Checks each of the eight backends: whether it is usable here and, if not, what is wrong
and what to do. Weakened isolation settings are listed as warnings. Exits non-zero when the
selected backend is not usable.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, err := a.loadConfig()
			if err != nil {
				return fmt.Errorf("%w\n(fix the file, or see `hermes-sandbox config path`)", err)
			}
			selected := a.sandboxFlag
			if selected == "" {
				selected = string(cfg.Terminal.Backend)
			}
			reports := a.diagnose(ctx, cfg, selected)
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(map[string]any{"config": cfg.Path(), "selected": selected, "backends": reports})
			}
			loaded := "present"
			if !cfg.FileLoaded() {
				loaded = "not present: defaults apply"
			}
			fmt.Fprintf(a.stdout, "config:   %s (%s)\n", cfg.Path(), loaded)
			fmt.Fprintf(a.stdout, "state:    %s\n", cfg.StateDir())
			fmt.Fprintf(a.stdout, "selected: %s\n", selected)
			fmt.Fprintf(a.stdout, "approvals: %s   audit: %v (%s)\n\n", cfg.Approvals.Mode, cfg.Audit.Enabled, cfg.Audit.LogDestination)
			bad := false
			for _, r := range reports {
				mark := "ok  "
				if !r.Usable {
					mark = "FAIL"
				}
				sel := " "
				if r.Selected {
					sel = "*"
					bad = !r.Usable
				}
				fmt.Fprintf(a.stdout, "%s %s %-12s", sel, mark, r.Backend)
				if r.Problem != "" {
					fmt.Fprintf(a.stdout, " %s", r.Problem)
				}
				fmt.Fprintln(a.stdout)
				if r.Detail != "" {
					fmt.Fprintf(a.stdout, "                    %s\n", r.Detail)
				}
				if r.Confinement != "" {
					fmt.Fprintf(a.stdout, "                    confinement: %s\n", r.Confinement)
				}
				if r.Egress != nil {
					fmt.Fprintf(a.stdout, "                    egress: %s\n", r.Egress.Detail)
				}
				if r.Secrets != "" {
					fmt.Fprintf(a.stdout, "                    secrets: %s\n", r.Secrets)
				}
				for _, w := range r.Warnings {
					fmt.Fprintf(a.stdout, "                    warning: %s\n", w)
				}
			}
			if selected == string(config.BackendAuto) {
				fmt.Fprintln(a.stdout, "\nno backend chosen (auto): docker is used when usable; otherwise commands are refused, since local "+
					"(no isolation) runs only when chosen. Choose with `hermes-sandbox setup` or `hermes-sandbox config set sandbox NAME`.")
			}
			if bad {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) diagnose(ctx context.Context, cfg *config.Config, selected string) []backendReport {
	var out []backendReport
	for _, name := range sandbox.BuiltinNames {
		// auto runs docker or nothing, so docker's report is the one that decides.
		r := backendReport{Backend: name, Selected: name == selected || selected == string(config.BackendAuto) && name == "docker"}
		if !a.registry.Has(name) {
			r.Problem = "not built into this version of hermes-sandbox yet; use one of: " + strings.Join(a.registry.Names(), ", ")
			out = append(out, r)
			continue
		}
		b, err := a.registry.New(name, cfg, a.factoryOptions(cfg))
		if err != nil {
			r.Problem = err.Error()
			out = append(out, r)
			continue
		}
		if ch, ok := b.(sandbox.Checker); ok {
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			err = ch.Check(cctx)
			cancel()
		}
		r.Usable = err == nil
		if err != nil {
			r.Problem = err.Error()
		} else {
			r.Problem = b.Capabilities().Isolation
		}
		if w, ok := b.(sandbox.Warner); ok {
			r.Warnings = w.Warnings()
		}
		if d, ok := b.(describer); ok {
			r.Detail = d.Describe()
		}
		if n, ok := b.(imageNoter); ok && r.Usable {
			if note := n.ImageNote(ctx); note != "" {
				r.Detail = strings.Join(slices.DeleteFunc([]string{r.Detail, note}, func(s string) bool { return s == "" }), "; ")
			}
		}
		if c, ok := b.(gate.Confiner); ok {
			_, r.Confinement = c.Confinement()
		}
		rep := egressReport(b)
		r.Egress = &rep
		r.Secrets = "not available: no egress proxy of this tool brokers secrets for this backend"
		if sb, ok := b.(secretBroker); ok {
			_, r.Secrets = sb.BrokersSecrets()
		}
		if err := checkSharedEgress(cfg, b); err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("terminal.egress_allow is set but %s does not enforce it (egress %s): commands are refused until it is unset or enforced", name, rep.Status))
		}
		b.Close()
		out = append(out, r)
	}
	return out
}
