package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/config"
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
	var n, j, rounds int
	var asJSON, ephemeral bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "bench [--sandbox NAME] [-n N] [--json]",
		Short: "Measure per-command overhead in a warm session next to the backend's raw baseline",
		Long: `Runs 'true' N times in a warm session and reports the round-trip time through
hermes-sandbox (p50/p95/p99), next to the raw way of doing the same on that backend, measured
in the same run: plain fork/exec of 'sh -c true' for local, a raw Engine API exec for docker,
a new SSH session per command for ssh.

With --ephemeral, runs N processes of 'hermes-sandbox exec --ephemeral -- true' (each a fresh
sandbox, through the session owner and its warm pool), -j at a time, and reports tasks per
second and the median task time, next to N runs of the backend's fresh-container baseline
('docker run --rm IMAGE true' through the Engine API for docker) at the same concurrency. The
two sides alternate in --rounds rounds; the figures are the medians of the rounds.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return usagef("bench: -n must be at least 1")
			}
			if !ephemeral && (cmd.Flags().Changed("j") || cmd.Flags().Changed("rounds") || cmd.Flags().Changed("interval")) {
				return usagef("bench: -j, --rounds and --interval apply to --ephemeral only")
			}
			if j < 1 || rounds < 1 || rounds > n || interval < 0 {
				return usagef("bench: want -j ≥ 1, 1 ≤ --rounds ≤ -n and --interval ≥ 0")
			}
			ctx := cmd.Context()
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if ephemeral {
				return a.benchEphemeral(ctx, cfg, n, j, rounds, interval, asJSON)
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
	cmd.Flags().BoolVar(&ephemeral, "ephemeral", false, "measure `exec --ephemeral -- true` processes (tasks/second at -j) next to the backend's fresh-container baseline")
	cmd.Flags().IntVarP(&j, "j", "j", 8, "with --ephemeral: tasks running at once")
	cmd.Flags().IntVar(&rounds, "rounds", 4, "with --ephemeral: alternate the two sides this many times (ABAB…), n/rounds tasks each")
	cmd.Flags().DurationVar(&interval, "interval", 0, "with --ephemeral: pause between one runner's tasks (lets a warm pool refill: latency from a warm pool)")
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

// EphemeralBenchResult is bench --ephemeral's result and its --json output; field names are
// part of the CLI's contract. Rates and times are medians over the rounds.
type EphemeralBenchResult struct {
	Backend     string  `json:"backend"`
	N           int     `json:"n"`
	Concurrency int     `json:"concurrency"`
	Rounds      int     `json:"rounds"`
	IntervalMS  float64 `json:"interval_ms"`
	// TasksPerSecond is `exec --ephemeral -- true` processes completed per second.
	TasksPerSecond float64   `json:"tasks_per_second"`
	TaskP50MS      float64   `json:"task_p50_ms"`
	RoundRates     []float64 `json:"round_tasks_per_second"`
	Baseline       string    `json:"baseline"`
	BaselineRate   float64   `json:"baseline_tasks_per_second"`
	BaselineP50MS  float64   `json:"baseline_task_p50_ms"`
	BaselineRounds []float64 `json:"baseline_round_tasks_per_second"`
}

// runBaseliner times the backend's own fresh-sandbox-per-task baseline (docker: `docker run
// --rm IMAGE true` through the Engine API), n runs at concurrency j.
type runBaseliner interface {
	RunBaseline(ctx context.Context, n, j int) (string, []time.Duration, error)
}

func (a *app) benchEphemeral(ctx context.Context, cfg *config.Config, n, j, rounds int, interval time.Duration, asJSON bool) error {
	b, err := a.openBackend(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var global []string
	if a.configFlag != "" {
		global = append(global, "--config", a.configFlag)
	}
	if a.sandboxFlag != "" {
		global = append(global, "--sandbox", a.sandboxFlag)
	}
	task := func() (time.Duration, error) {
		t := time.Now()
		cmd := exec.CommandContext(ctx, exe, append(global, "exec", "--ephemeral", "--", "true")...)
		cmd.Env = a.environ
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("bench: exec --ephemeral -- true: %v: %s", err, strings.TrimSpace(errb.String()))
		}
		return time.Since(t), nil
	}
	// Two runs start the session owner (it starts at the second exec of an environment);
	// a third finds it.
	for range 3 {
		if _, err := task(); err != nil {
			return err
		}
	}
	out := EphemeralBenchResult{Backend: b.Name(), N: n, Concurrency: j, Rounds: rounds, IntervalMS: ms(interval)}
	rb, hasBaseline := b.(runBaseliner)
	var all, allBase []time.Duration
	for r := range rounds {
		k := n / rounds
		if r < n%rounds {
			k++
		}
		t := time.Now()
		ds, err := runTasks(ctx, k, j, interval, task)
		if err != nil {
			return err
		}
		out.RoundRates = append(out.RoundRates, float64(k)/time.Since(t).Seconds())
		all = append(all, ds...)
		if !hasBaseline {
			continue
		}
		t = time.Now()
		label, bds, err := rb.RunBaseline(ctx, k, j)
		if err != nil {
			return fmt.Errorf("bench: baseline: %w", err)
		}
		out.Baseline = label
		out.BaselineRounds = append(out.BaselineRounds, float64(k)/time.Since(t).Seconds())
		allBase = append(allBase, bds...)
		if !asJSON {
			// A long run on a loaded machine shows its progress round by round.
			fmt.Fprintf(a.stderr, "round %d of %d: %d tasks: %.2f tasks/s; baseline %.2f tasks/s\n",
				r+1, rounds, k, out.RoundRates[r], out.BaselineRounds[r])
		}
	}
	out.TasksPerSecond, out.TaskP50MS = median(out.RoundRates), ms(pct(all, 50))
	if hasBaseline {
		out.BaselineRate, out.BaselineP50MS = median(out.BaselineRounds), ms(pct(allBase, 50))
	}
	if asJSON {
		return json.NewEncoder(a.stdout).Encode(out)
	}
	fmt.Fprintf(a.stdout, "backend %s, %d ephemeral tasks (`exec --ephemeral -- true` processes), %d at a time, %d rounds alternating with the baseline\n",
		out.Backend, n, j, rounds)
	fmt.Fprintf(a.stdout, "  hermes-sandbox exec --ephemeral: %.2f tasks/s (median of rounds %s)  task p50 %.1f ms\n",
		out.TasksPerSecond, rates(out.RoundRates), out.TaskP50MS)
	if hasBaseline {
		fmt.Fprintf(a.stdout, "  baseline (%s): %.2f tasks/s (median of rounds %s)  task p50 %.1f ms\n",
			out.Baseline, out.BaselineRate, rates(out.BaselineRounds), out.BaselineP50MS)
		fmt.Fprintf(a.stdout, "  ratio: %.2fx the baseline's tasks/s; task time %.2fx the baseline's\n",
			out.TasksPerSecond/out.BaselineRate, out.TaskP50MS/out.BaselineP50MS)
	} else {
		fmt.Fprintf(a.stdout, "  (the %s backend has no fresh-sandbox baseline)\n", out.Backend)
	}
	return nil
}

// runTasks runs task n times, j at a time, each runner pausing interval between its tasks,
// and returns each task's time.
func runTasks(ctx context.Context, n, j int, interval time.Duration, task func() (time.Duration, error)) ([]time.Duration, error) {
	var mu sync.Mutex
	var ds []time.Duration // guarded by mu
	var firstErr error     // guarded by mu
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range j {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				d, err := task()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				ds = append(ds, d)
				mu.Unlock()
				if interval > 0 && sandbox.Sleep(ctx, interval) != nil {
					return
				}
			}
		}()
	}
	for range n {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return ds, firstErr
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}
