package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// setupQuestion is one setting the wizard asks for.
type setupQuestion struct {
	key    string
	prompt string
}

// setupQuestions lists, per backend, what the wizard asks. Secrets are read without echo and
// stored in secrets.yaml.
var setupQuestions = map[string][]setupQuestion{
	"local": {{"terminal.cwd", "Working directory for new sessions (empty = where you run hermes-sandbox)"}},
	"docker": {
		{"docker.image", "Image (" + config.BuiltDockerImage + " is the one `make run` builds with no registry; or one from `hermes-sandbox image list`)"},
		{"docker.memory_limit", "Memory limit"},
		{"docker.network", "Network (none, allowlist or open)"},
	},
	"ssh":         {{"ssh.host", "Host (or a Host alias from ~/.ssh/config)"}, {"ssh.user", "User"}, {"ssh.port", "Port"}, {"ssh.key", "Private key file"}},
	"singularity": {{"singularity.image", "Image (.sif file or docker://ref)"}},
	"modal": {
		{"modal.token_id", "Modal token id"},
		{"modal.token_secret", "Modal token secret"},
		{"modal.image", "Image"},
		{"modal.gpu", "GPU (empty for none, e.g. A10G or A100:2)"},
	},
	"daytona": {
		{"daytona.api_key", "Daytona API key"},
		{"daytona.api_url", "API URL (empty = https://app.daytona.io/api)"},
		{"daytona.target", "Target region (empty = the organisation's default)"},
		{"daytona.snapshot", "Snapshot (empty = Daytona's default; or set daytona.image instead)"},
		{"daytona.auto_stop", "Hibernate after this long idle"},
	},
	"vercel": {{"vercel.token", "Vercel token"}, {"vercel.project_id", "Project id"}, {"vercel.team_id", "Team id"}},
	"kubernetes": {
		{"kubernetes.kubeconfig", "Kubeconfig file (empty = $KUBECONFIG, else ~/.kube/config, else in-cluster)"},
		{"kubernetes.context", "Context (empty = the kubeconfig's current one)"},
		{"kubernetes.namespace", "Namespace (empty = the context's)"},
		{"kubernetes.image", "Image (its /bin/sh runs the session; any uid must be able to use it)"},
		{"kubernetes.runtime_class", "RuntimeClass (empty = the cluster default; gvisor or kata isolate more)"},
	},
}

func (a *app) setupCmd() *cobra.Command {
	var nonInteractive, noTest bool
	var sets []string
	cmd := &cobra.Command{
		Use:   "setup [BACKEND]",
		Short: "Choose a backend, enter its settings and credentials, and prove it works",
		Long: `An interactive wizard: it recommends a backend from what this machine has (a Docker engine
→ docker; signs of an HPC cluster such as SLURM or apptainer → singularity; otherwise local,
with a warning), asks for that backend's settings and secrets, writes the config (secrets to
secrets.yaml, mode 0600), then runs a test command in the backend.

For scripts: --non-interactive with --set KEY=VALUE for each setting.`,
		Example: `  hermes-sandbox setup
  hermes-sandbox setup ssh --non-interactive --set ssh.host=build1 --set ssh.user=ci`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("setup: at most one backend name")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			in := bufio.NewReader(a.stdin)
			interactive := !nonInteractive
			if interactive && !isTerminal(a.stdin) {
				fmt.Fprintln(a.stderr, "setup: stdin is not a terminal; answering from it line by line (use --non-interactive to take defaults)")
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			rec, why := a.recommend(ctx)
			if name == "" {
				fmt.Fprintf(a.stdout, "Recommended backend: %s (%s)\n", rec, why)
				name = rec
				if interactive {
					name = a.ask(in, "Backend ["+strings.Join(sandbox.BuiltinNames, "|")+"]", rec, false)
				}
			}
			if !sandbox.ValidName(name) {
				return unknownBackend("setup: ", name)
			}
			if name == "local" {
				fmt.Fprintln(a.stdout, "warning: the local backend runs commands directly on this host as you, with no isolation. Use it only in a throwaway VM.")
			}
			path := a.configPath()
			values := map[string]string{}
			for _, kv := range sets {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return usagef("setup: --set %q: want KEY=VALUE", kv)
				}
				values[k] = v
			}
			cfg, err := a.loadConfig()
			if err != nil {
				cfg = config.NewConfig()
			}
			defaults := map[string]string{}
			if a.registry.Has(name) {
				if b, err := a.registry.New(name, cfg, a.factoryOptions(cfg)); err == nil {
					if h, ok := b.(setupHinter); ok && h.SetupHint() != "" {
						fmt.Fprintln(a.stdout, h.SetupHint())
					}
					if name == "docker" {
						img, hint := a.setupDockerImage(ctx, b, cfg)
						defaults["docker.image"] = img
						if hint != "" {
							fmt.Fprintln(a.stdout, hint)
						}
					}
					b.Close()
				}
			}
			if interactive {
				for _, q := range setupQuestions[name] {
					if _, given := values[q.key]; given {
						continue
					}
					def, _ := config.Get(cfg, q.key)
					if d, ok := defaults[q.key]; ok {
						def = d
					}
					secret := config.IsSecretKey(q.key)
					if secret {
						def = ""
					}
					cur, _ := config.Get(cfg, q.key)
					if v := a.ask(in, q.prompt+" ("+q.key+")", def, secret); v != "" && v != cur {
						values[q.key] = v
					}
				}
			}
			// Validate everything before writing anything.
			trial := *cfg
			for k, v := range values {
				if err := trial.SetValue(k, v); err != nil {
					return err
				}
			}
			if err := trial.SetValue("terminal.backend", name); err != nil {
				return err
			}
			kvs := []config.KV{}
			for k, v := range values {
				kvs = append(kvs, config.KV{Key: k, Value: v})
			}
			kvs = append(kvs, config.KV{Key: "terminal.backend", Value: name})
			restore, err := snapshotFiles(path, config.SecretsPathFor(path))
			if err != nil {
				return err
			}
			if err := config.SetMany(path, kvs); err != nil {
				return err
			}
			wrote := func() {
				fmt.Fprintf(a.stdout, "Wrote %s (secrets, if any, to %s)\n", path, config.SecretsPathFor(path))
			}
			if noTest {
				wrote()
				return nil
			}
			// The settings are in place for the test; they are reported as written only once they
			// are kept, so a failed test does not read "Wrote…" then "restored".
			terr := a.setupTest(ctx, name)
			if terr == nil {
				wrote()
				return nil
			}
			fmt.Fprintf(a.stderr, "setup: the test failed: %v\n", terr)
			keep := false
			if interactive {
				keep = strings.HasPrefix(strings.ToLower(a.ask(in, "Keep the new settings anyway? [y/N]", "n", false)), "y")
			}
			if keep {
				wrote()
			} else if rerr := restore(); rerr != nil {
				return errors.Join(terr, fmt.Errorf("setup: could not restore the previous settings: %w", rerr))
			} else {
				fmt.Fprintf(a.stderr, "setup: nothing written to %s: the new settings were not kept because the test failed\n", path)
			}
			return terr
		},
	}
	cmd.Flags().BoolVar(&nonInteractive, "non-interactive", false, "ask nothing; take --set values and current settings")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "KEY=VALUE setting to write (repeatable)")
	cmd.Flags().BoolVar(&noTest, "no-test", false, "do not run the test command")
	return cmd
}

// setupDockerImage is the docker.image the wizard offers, and a line to print before it asks:
// the configured image when the engine has it; else the image `make run` builds when the
// engine has that (never an image that is not here); else that one, with the command that
// builds it. The engine not answering offers the configured image (the test says why).
func (a *app) setupDockerImage(ctx context.Context, b sandbox.Backend, cfg *config.Config) (image, hint string) {
	ch, ok := b.(sandbox.Checker)
	if !ok {
		return cfg.Docker.Image, ""
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := ch.Check(cctx)
	switch {
	case err == nil:
		if n, ok := b.(imageNoter); ok && n.ImageNote(cctx) != "" {
			return config.BuiltDockerImage, ""
		}
		return cfg.Docker.Image, ""
	case !engineUp(err):
		return cfg.Docker.Image, ""
	}
	if im, ok := b.(sandbox.ImageManager); ok {
		if list, lerr := im.Images(cctx); lerr == nil {
			for _, i := range list {
				if i.Ref == config.BuiltDockerImage {
					return config.BuiltDockerImage, fmt.Sprintf("%s is not on this machine; %s is", cfg.Docker.Image, config.BuiltDockerImage)
				}
			}
		}
	}
	return config.BuiltDockerImage, fmt.Sprintf("No image to run yet (%s is not on this machine). Build %s from Debian's packages, "+
		"no registry needed, with `%s` (or `make run`), then run setup again.", cfg.Docker.Image, config.BuiltDockerImage, config.BuildDockerImage)
}

// setupHinter is implemented by backends that can tell the wizard something useful before it
// asks (credentials found elsewhere, for one).
type setupHinter interface{ SetupHint() string }

// setupTest proves the backend works with a real command.
func (a *app) setupTest(ctx context.Context, name string) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	saved := a.sandboxFlag
	a.sandboxFlag = name
	defer func() { a.sandboxFlag = saved }()
	b, err := a.openBackend(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	if ch, ok := b.(sandbox.Checker); ok {
		if err := ch.Check(ctx); err != nil {
			return fmt.Errorf("setup: %s is not usable yet: %w", name, err)
		}
	}
	fmt.Fprintf(a.stdout, "Testing %s with a real command…\n", name)
	sess, err := b.Open(ctx, "setup-test")
	if err != nil {
		return fmt.Errorf("setup: open a test session: %w", err)
	}
	defer func() {
		sess.Close()
		if m, ok := b.(sandbox.SessionManager); ok {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			m.Remove(cctx, "setup-test")
			cancel()
		}
	}()
	res, err := sess.Exec(ctx, sandbox.Command{Script: "echo hermes-sandbox-ok; id -u; pwd", Timeout: time.Minute})
	if err != nil {
		return fmt.Errorf("setup: test command failed: %w", err)
	}
	if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "hermes-sandbox-ok") {
		return fmt.Errorf("setup: test command exited %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	fmt.Fprintf(a.stdout, "OK: %s works (uid %s, cwd %s, %.0f ms). It is now the default backend.\n",
		name, at(lines, 1), at(lines, 2), float64(res.Duration.Microseconds())/1000)
	return nil
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "?"
}

// ask prompts on stderr and reads one line; a secret is read without echo on a terminal.
func (a *app) ask(in *bufio.Reader, prompt, def string, secret bool) string {
	if def != "" {
		fmt.Fprintf(a.stderr, "%s [%s]: ", prompt, def)
	} else {
		fmt.Fprintf(a.stderr, "%s: ", prompt)
	}
	var line string
	if f, ok := a.stdin.(*os.File); ok && secret && term.IsTerminal(int(f.Fd())) {
		b, _ := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		line = string(b)
	} else {
		line, _ = in.ReadString('\n')
	}
	line = strings.TrimSpace(line)
	if line == "" {
		return def
	}
	return line
}

// recommend picks a backend from what this machine has.
func (a *app) recommend(ctx context.Context) (string, string) {
	if a.registry.Has("docker") {
		cfg, err := a.loadConfig()
		if err != nil {
			cfg = config.NewConfig()
		}
		if b, err := a.registry.New("docker", cfg, a.factoryOptions(cfg)); err == nil {
			defer b.Close()
			if ch, ok := b.(sandbox.Checker); ok {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if err := ch.Check(cctx); err == nil {
					return "docker", "a Docker engine answers on this machine"
				} else if engineUp(err) {
					return "docker", "a Docker engine answers; it still needs an image: `" + config.BuildDockerImage + "` builds one with no registry"
				}
			}
		}
	}
	for _, v := range []string{"SLURM_JOB_ID", "SLURM_CLUSTER_NAME", "PBS_JOBID"} {
		if a.getenv(v) != "" {
			return "singularity", "this looks like an HPC cluster (" + v + " is set)"
		}
	}
	for _, exe := range []string{"apptainer", "singularity", "sbatch"} {
		if _, err := exec.LookPath(exe); err == nil {
			return "singularity", exe + " is installed, which suggests an HPC cluster"
		}
	}
	return "local", "no Docker engine or HPC tools found; WARNING: local gives no isolation"
}

// snapshotFiles saves the named files as they are now (or their absence) and returns a
// function that puts them back.
func snapshotFiles(paths ...string) (func() error, error) {
	type saved struct {
		data   []byte
		mode   os.FileMode
		exists bool
	}
	state := map[string]saved{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if os.IsNotExist(err) {
			state[p] = saved{}
			continue
		}
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		state[p] = saved{data, st.Mode().Perm(), true}
	}
	return func() error {
		var errs []error
		for p, s := range state {
			if !s.exists {
				if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
					errs = append(errs, err)
				}
				continue
			}
			errs = append(errs, os.WriteFile(p, s.data, s.mode))
		}
		return errors.Join(errs...)
	}, nil
}

// engineUp reports whether a docker check failed only because the image is missing.
func engineUp(err error) bool { return errors.Is(err, sandbox.ErrNotFound) }
