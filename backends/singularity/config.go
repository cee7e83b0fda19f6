//go:build !windows

package singularity

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Fixed paths and limits inside every instance.
const (
	// agentInCtr is where the helper binary is bound, read-only.
	agentInCtr = "/.hermes/sandbox-agent"
	// helperState is the helper's state directory. With --containall, /tmp is private to the
	// instance, so the state lives exactly as long as the instance does.
	helperState = "/tmp/.hermes/state"
	// workspaceDir is the session's persistent, writable directory, bound from the state
	// directory on the host; it is the default working directory.
	workspaceDir = "/workspace"
	// pidsLimit bounds the processes of one instance (a fork bomb stops there). Unprivileged
	// users get it only with cgroups v2 and systemd delegation; see Backend.startInstance.
	pidsLimit = 1024
	// stopGrace is how long `instance stop` waits before it kills.
	stopGrace = 10
)

// startSpec is everything `instance start` needs.
type startSpec struct {
	Image     string   // a local SIF file (or sandbox directory)
	Instance  string   // the instance name
	Helper    string   // host path of the static helper binary
	Workspace string   // host directory bound to /workspace
	Overlay   string   // host directory used as a persistent overlay; "" = --writable-tmpfs
	Binds     []string // singularity.binds, as given (src[:dst[:ro|rw]])
	Limits    bool     // apply --pids-limit
}

// startArgs is the command line (after the executable) that starts a session's instance.
// Every isolation flag is here, because only `instance start` applies them: later execs join
// the instance's namespaces as they are.
func startArgs(s startSpec) []string {
	args := []string{"instance", "start",
		"--containall",               // contain file systems, PID, IPC and environment
		"--no-home",                  // do not mount the user's home directory
		"--no-privs",                 // drop every capability, even from root in the container
		"--net", "--network", "none", // loopback only
	}
	if s.Overlay != "" {
		args = append(args, "--overlay", s.Overlay)
	} else {
		args = append(args, "--writable-tmpfs")
	}
	args = append(args, "-B", s.Helper+":"+agentInCtr+":ro", "-B", s.Workspace+":"+workspaceDir)
	for _, b := range s.Binds {
		args = append(args, "-B", b)
	}
	if s.Limits {
		args = append(args, "--pids-limit", strconv.Itoa(pidsLimit))
	}
	return append(args, s.Image, s.Instance)
}

// execSpec is everything the helper's `exec` needs.
type execSpec struct {
	Instance string
	EnvFile  string   // host path of the 0600 passthrough file; "" = none
	Pre      []string // helper arguments before `serve` (["__agent"] for hermes-sandbox itself)
	Cwd      string
	Shell    string
}

// execArgs is the command line that runs the session's helper in its instance. The
// environment is rebuilt on every exec, so --cleanenv is here, not on `instance start`;
// passthrough values come from a file so they never appear on a command line.
func execArgs(e execSpec) []string {
	args := []string{"exec", "--cleanenv"}
	if e.EnvFile != "" {
		args = append(args, "--env-file", e.EnvFile)
	}
	args = append(args, "instance://"+e.Instance, agentInCtr)
	args = append(args, e.Pre...)
	shell := e.Shell
	if shell == "" {
		shell = "auto"
	}
	return append(args, "serve", "--state", helperState, "--cwd", e.Cwd, "--shell", shell)
}

// stopArgs stops an instance: gracefully (SIGTERM, then SIGKILL after stopGrace seconds),
// or at once when force is set.
func stopArgs(instance string, force bool) []string {
	if force {
		return []string{"instance", "stop", "-F", instance}
	}
	return []string{"instance", "stop", "-t", strconv.Itoa(stopGrace), instance}
}

// listArgs lists the user's instances as JSON.
func listArgs() []string { return []string{"instance", "list", "--json"} }

// buildArgs converts a remote image into a SIF file.
func buildArgs(dst, ref string) []string { return []string{"build", dst, ref} }

// versionArgs is the probe.
func versionArgs() []string { return []string{"version"} }

// remoteImage reports whether ref must be built into a SIF first (docker://, oras://,
// library://, docker-archive: and the like) rather than used as a local path.
func remoteImage(ref string) bool {
	if strings.Contains(ref, "://") {
		return true
	}
	for _, p := range []string{"docker-archive:", "docker-daemon:", "oci-archive:", "oci:"} {
		if strings.HasPrefix(ref, p) {
			return true
		}
	}
	return false
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// cachedImageName is the SIF file name a remote ref is converted to: readable, and unique
// through a hash of the full ref.
func cachedImageName(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	base := sanitized(ref)
	if len(base) > 60 {
		base = base[:60]
	}
	return base + "-" + hex.EncodeToString(sum[:])[:12] + ".sif"
}

// workdir is the session's starting directory.
func workdir(cfg config.SingularityConfig) string {
	if cfg.Cwd != "" {
		return cfg.Cwd
	}
	return workspaceDir
}

// validate checks what Open needs from the configuration.
func validate(cfg config.SingularityConfig) error {
	if strings.TrimSpace(cfg.Image) == "" {
		return fmt.Errorf("singularity.image is not set: set it to a SIF file or a docker:// reference (hermes-sandbox config set singularity.image docker://python:3.12-slim): %w",
			sandbox.ErrInvalidConfig)
	}
	for _, b := range cfg.Binds {
		if strings.Contains(b, ",") {
			return fmt.Errorf("singularity.binds: %q: a comma would split it into two binds: %w", b, sandbox.ErrInvalidConfig)
		}
	}
	return nil
}

// envFileContent renders K=V pairs in the shell syntax that --env-file reads.
func envFileContent(env []string) []byte {
	var sb strings.Builder
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		sb.WriteString(k + "=" + sandbox.ShellQuote(v) + "\n")
	}
	return []byte(sb.String())
}

// runtimeEnv is the environment of the apptainer process itself: ours, minus the variables
// apptainer would inject into the container despite --cleanenv (APPTAINERENV_*,
// SINGULARITYENV_*), so only terminal.env_passthrough reaches a sandbox.
func runtimeEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "APPTAINERENV_") || strings.HasPrefix(kv, "SINGULARITYENV_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// writeFileAtomic writes data to p (mode 0600) through a temporary file and a rename.
func writeFileAtomic(p string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-"+filepath.Base(p)+"-")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
