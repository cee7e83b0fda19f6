package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Shell completion (cobra's `completion bash|zsh|fish|powershell`) for what people type most:
// config keys and their aliases, backend names, session names and job ids. Completions that
// need the backend only look: they never create a sandbox, and give up after two seconds.

const completeTimeout = 2 * time.Second

func (a *app) registerCompletions(root *cobra.Command) {
	backends := func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return slices.Clone(sandbox.BuiltinNames), cobra.ShellCompDirectiveNoFileComp
	}
	for _, f := range []string{"sandbox", "terminal"} {
		_ = root.RegisterFlagCompletionFunc(f, backends)
	}
	for _, c := range root.Commands() {
		switch c.Name() {
		case "config":
			for _, sub := range c.Commands() {
				switch sub.Name() {
				case "get", "unset":
					sub.ValidArgsFunction = onlyFirst(configKeys)
				case "set":
					sub.ValidArgsFunction = a.configSetCompletion
				}
			}
		case "setup":
			c.ValidArgsFunction = onlyFirst(backends)
		case "exec", "shell", "jobs":
			_ = c.RegisterFlagCompletionFunc("session", a.sessionNames)
			if c.Name() == "jobs" {
				for _, sub := range c.Commands() {
					if sub.Name() != "list" {
						sub.ValidArgsFunction = onlyFirst(a.jobIDs)
					}
				}
			}
		case "sessions":
			for _, sub := range c.Commands() {
				if sub.Name() == "rm" {
					sub.ValidArgsFunction = a.sessionNames
				}
			}
		}
	}
}

// onlyFirst completes the first positional argument only.
func onlyFirst(fn cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return fn(cmd, args, toComplete)
	}
}

func configKeys(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	keys := config.Keys()
	for _, al := range config.Aliases() {
		keys = append(keys, al.Name)
	}
	slices.Sort(keys)
	return keys, cobra.ShellCompDirectiveNoFileComp
}

// configSetCompletion completes the key, then for a backend key the backend names.
func (a *app) configSetCompletion(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return configKeys(cmd, args, toComplete)
	case 1:
		if k := args[0]; k == "sandbox" || k == "terminal.backend" || k == "terminal_backend" || k == "terminal_env" {
			return append([]string{"auto"}, sandbox.BuiltinNames...), cobra.ShellCompDirectiveNoFileComp
		}
		if strings.HasSuffix(args[0], "_enabled") || strings.HasPrefix(args[0], "tools.") {
			return []string{"true", "false"}, cobra.ShellCompDirectiveNoFileComp
		}
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// existingSessions lists the sessions the configured backend knows, without creating any.
func (a *app) existingSessions(cmd *cobra.Command) []string {
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	cmd.SetContext(ctx)
	m, done, err := a.sessionManager(cmd)
	if err != nil {
		return nil
	}
	defer done()
	infos, err := m.Sessions(ctx)
	if err != nil {
		return nil
	}
	names := make([]string, len(infos))
	for i, s := range infos {
		names[i] = s.Name
	}
	return names
}

func (a *app) sessionNames(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.existingSessions(cmd), cobra.ShellCompDirectiveNoFileComp
}

// jobIDs lists the jobs of the --session session, if that session exists.
func (a *app) jobIDs(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	name, _ := cmd.Flags().GetString("session")
	if name == "" {
		name = sandbox.DefaultSession
	}
	if !slices.Contains(a.existingSessions(cmd), name) {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	b, err := a.openBackend(ctx, cfg)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer b.Close()
	sess, err := b.Open(ctx, name)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer sess.Close()
	jr, ok := sess.(sandbox.JobRunner)
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	jobs, err := jr.Jobs(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ids := make([]string, 0, len(jobs))
	for _, j := range jobs {
		ids = append(ids, j.ID+"\t"+j.Command)
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}
