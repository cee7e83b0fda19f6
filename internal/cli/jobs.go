package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func (a *app) jobsCmd() *cobra.Command {
	var session string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "Manage background jobs started with `exec --background` (list, poll, wait, kill)",
	}
	cmd.PersistentFlags().StringVar(&session, "session", sandbox.DefaultSession, "session name")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON")
	withJobs := func(cmd *cobra.Command, fn func(sandbox.JobRunner) error) error {
		ctx := cmd.Context()
		cfg, err := a.loadConfig()
		if err != nil {
			return err
		}
		_, b, sess, done, err := a.openSession(ctx, cfg, session)
		if err != nil {
			return err
		}
		defer done()
		jr, ok := sess.(sandbox.JobRunner)
		if !ok || !b.Capabilities().Jobs {
			return fmt.Errorf("the %s backend has no background jobs: %w", b.Name(), sandbox.ErrUnsupported)
		}
		return fn(jr)
	}
	printOut := func(o sandbox.JobOutput) error {
		if asJSON {
			return json.NewEncoder(a.stdout).Encode(o)
		}
		fmt.Fprint(a.stdout, o.Stdout)
		fmt.Fprint(a.stderr, o.Stderr)
		if !o.Running && o.ExitCode != nil {
			fmt.Fprintf(a.stderr, "[%s exited %d]\n", o.ID, *o.ExitCode)
		}
		return nil
	}
	list := &cobra.Command{Use: "list", Short: "List jobs", Args: exactArgs(0), RunE: func(cmd *cobra.Command, args []string) error {
		return withJobs(cmd, func(jr sandbox.JobRunner) error {
			jobs, err := jr.Jobs(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(jobs)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tSTARTED\tCOMMAND")
			for _, j := range jobs {
				status := "running"
				if !j.Running && j.ExitCode != nil {
					status = fmt.Sprintf("exited %d", *j.ExitCode)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.ID, status, j.Started.Local().Format("15:04:05"), j.Command)
			}
			return tw.Flush()
		})
	}}
	poll := &cobra.Command{Use: "poll ID", Short: "Print output written since the last poll", Args: exactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		return withJobs(cmd, func(jr sandbox.JobRunner) error {
			o, err := jr.PollJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printOut(o)
		})
	}}
	wait := &cobra.Command{Use: "wait ID", Short: "Wait for a job to end and print its remaining output", Args: exactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		return withJobs(cmd, func(jr sandbox.JobRunner) error {
			o, err := jr.WaitJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := printOut(o); err != nil {
				return err
			}
			if o.ExitCode != nil && *o.ExitCode != 0 {
				return exitError{*o.ExitCode}
			}
			return nil
		})
	}}
	kill := &cobra.Command{Use: "kill ID", Short: "Kill a job's whole process tree", Args: exactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		return withJobs(cmd, func(jr sandbox.JobRunner) error {
			st, err := jr.KillJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "killed %s\n", st.ID)
			return nil
		})
	}}
	cmd.AddCommand(list, poll, wait, kill)
	return cmd
}
