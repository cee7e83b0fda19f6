package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// BenchResult is the bench result and its --json output; field names are part of the CLI's contract.
type BenchResult struct {
	Backend       string  `json:"backend"`
	N             int     `json:"n"`
	OverheadP50MS float64 `json:"overhead_p50_ms"`
	OverheadP95MS float64 `json:"overhead_p95_ms"`
	OverheadP99MS float64 `json:"overhead_p99_ms"`
	Baseline      string  `json:"baseline"`
	BaselineP50MS float64 `json:"baseline_p50_ms"`
	BaselineP95MS float64 `json:"baseline_p95_ms"`
	FirstMS       float64 `json:"first_command_ms"`
	// ScriptP50MS times a script that needs the session's shell (`:`, a builtin): the shell start,
	// the exit trap and the state check that plain commands skip.
	ScriptP50MS float64 `json:"script_p50_ms"`
	ScriptP95MS float64 `json:"script_p95_ms"`
}

func (a *app) benchCmd() *cobra.Command {
	var n int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bench [--sandbox NAME] [-n N] [--json]",
		Short: "Measure per-command overhead in a warm session next to the backend's raw baseline",
		Long: `Runs 'true' N times in a warm session and reports the round-trip time through
hermes-sandbox (p50/p95/p99), next to the raw way of doing the same on that backend, measured
in the same run: plain fork/exec of 'sh -c true' for local, a raw Engine API exec for docker,
a new SSH session per command for ssh.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return usagef("bench: -n must be at least 1")
			}
			ctx := cmd.Context()
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			b, err := a.openBackend(ctx, cfg)
			if err != nil {
				return err
			}
			defer b.Close()
			out, err := Bench(ctx, b, n)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(out)
			}
			fmt.Fprintf(a.stdout, "backend %s, %d runs of `true` in a warm session\n", out.Backend, out.N)
			fmt.Fprintf(a.stdout, "  first command (session start): %.2f ms\n", out.FirstMS)
			fmt.Fprintf(a.stdout, "  hermes-sandbox, `true`:  p50 %.3f ms  p95 %.3f ms  p99 %.3f ms\n", out.OverheadP50MS, out.OverheadP95MS, out.OverheadP99MS)
			fmt.Fprintf(a.stdout, "  hermes-sandbox, `:` (through the session shell): p50 %.3f ms  p95 %.3f ms\n", out.ScriptP50MS, out.ScriptP95MS)
			if out.Baseline != "" {
				fmt.Fprintf(a.stdout, "  baseline (%s): p50 %.3f ms  p95 %.3f ms\n", out.Baseline, out.BaselineP50MS, out.BaselineP95MS)
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&n, "n", "n", 200, "number of runs")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// Bench measures b: the first command of a new session, then n warm runs of `true`, then
// the backend's raw baseline in the same session.
func Bench(ctx context.Context, b sandbox.Backend, n int) (BenchResult, error) {
	out := BenchResult{Backend: b.Name(), N: n}
	name := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1_000_000)
	start := time.Now()
	sess, err := b.Open(ctx, name)
	if err != nil {
		return out, err
	}
	defer func() {
		sess.Close()
		if m, ok := b.(sandbox.SessionManager); ok {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			m.Remove(cctx, name)
			cancel()
		}
	}()
	run := func() (time.Duration, error) { return timeScript(ctx, sess, "true") }
	if _, err := run(); err != nil {
		return out, err
	}
	out.FirstMS = ms(time.Since(start))
	for i := 0; i < min(10, n); i++ { // warm up
		if _, err := run(); err != nil {
			return out, err
		}
	}
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		d, err := run()
		if err != nil {
			return out, err
		}
		ds = append(ds, d)
	}
	out.OverheadP50MS, out.OverheadP95MS, out.OverheadP99MS = ms(pct(ds, 50)), ms(pct(ds, 95)), ms(pct(ds, 99))
	sds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		d, err := timeScript(ctx, sess, ":")
		if err != nil {
			return out, err
		}
		sds = append(sds, d)
	}
	out.ScriptP50MS, out.ScriptP95MS = ms(pct(sds, 50)), ms(pct(sds, 95))
	if bl, ok := b.(sandbox.Baseliner); ok {
		label, bds, err := bl.Baseline(ctx, name, n)
		if err != nil {
			return out, fmt.Errorf("bench: baseline: %w", err)
		}
		out.Baseline, out.BaselineP50MS, out.BaselineP95MS = label, ms(pct(bds, 50)), ms(pct(bds, 95))
	}
	return out, nil
}

// timeScript runs one script and returns how long it took.
func timeScript(ctx context.Context, sess sandbox.Session, script string) (time.Duration, error) {
	t := time.Now()
	res, err := sess.Exec(ctx, sandbox.Command{Script: script})
	if err != nil {
		return 0, err
	}
	if res.ExitCode != 0 {
		return 0, fmt.Errorf("bench: %q exited %d: %s", script, res.ExitCode, res.Stderr)
	}
	return time.Since(t), nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct returns the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}
