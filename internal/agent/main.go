//go:build unix

package agent

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Main is the helper's command line: `sandbox-agent serve --state DIR [--shell SH] [--cwd DIR]`.
// It serves the protocol on stdin and stdout and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandbox-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "state directory of the session")
	shell := fs.String("shell", "auto", "shell for scripts: auto, bash, sh or a path")
	cwd := fs.String("cwd", "", "working directory of a fresh session")
	envPrefix := fs.String("drop-env-prefix", "HERMES_AGENT_", "drop helper variables with this prefix from the session")
	if len(args) == 1 && args[0] == "idle" {
		// A container's long-lived entrypoint that needs nothing from the image: wait for a
		// signal (Init: true delivers the stop signal).
		return idle()
	}
	if (len(args) == 3 || len(args) == 5 && args[3] == "--unix") && args[0] == "relay" && args[1] == "--listen" {
		// The egress relay of a sandbox with an allowlist (see Relay).
		upstream := ""
		if len(args) == 5 {
			upstream = args[4]
		}
		if err := Relay(args[2], upstream, stdin, stdout); err != nil {
			fmt.Fprintln(stderr, "sandbox-agent:", err)
			return 1
		}
		return 0
	}
	if len(args) == 3 && args[0] == "copytree" {
		// A docker fork's copy of a workspace volume into another (see CopyTree).
		st, err := CopyTree(args[1], args[2])
		if err != nil {
			fmt.Fprintln(stderr, "sandbox-agent: copytree:", err)
			return 1
		}
		fmt.Fprintf(stdout, "%d %d %d\n", st.Files, st.Bytes, st.Skipped)
		return 0
	}
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintln(stderr, "usage: sandbox-agent serve --state DIR [--shell auto|bash|sh|PATH] [--cwd DIR] | sandbox-agent relay --listen ADDR [--unix PATH] | sandbox-agent idle | sandbox-agent copytree FROM TO")
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, *envPrefix) {
			env = append(env, kv)
		}
	}
	srv, err := NewServer(Options{StateDir: *state, Shell: *shell, Cwd: *cwd, Env: env,
		OnSilence: func() {
			fmt.Fprintln(stderr, "sandbox-agent:", errSilent)
			os.Exit(1)
		}})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := srv.Serve(stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "sandbox-agent:", err)
		return 1
	}
	return 0
}

// idle waits for SIGTERM or SIGINT. As a container's PID 1 (an engine without an init
// process, such as Podman without catatonit) it also reaps the processes orphaned to it, as
// an init would: a command's background children that outlive it would otherwise stay
// zombies and fill the pids limit.
func idle() int {
	// Commands run as this process's user: they must not be able to trace it or write its
	// memory (a warm pool reuses the container after a reset, which keeps PID 1).
	_ = RefuseTracing()
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if os.Getpid() == 1 {
		signal.Notify(sig, syscall.SIGCHLD)
		reapOrphans() // any that ended before the handler was in place
	}
	for s := range sig {
		if s != syscall.SIGCHLD {
			return 0
		}
		reapOrphans()
	}
	return 0
}

// reapOrphans collects every ended child without blocking. PID 1 starts no children of its
// own, so each is an orphan adopted from a command.
func reapOrphans() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
