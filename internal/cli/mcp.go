package cli

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
)

// httpFromConfig is --http's value when it is given without an address.
const httpFromConfig = "config"

type mcpFlags struct {
	http         string
	token        string
	keepSessions bool
	session      string
	idleTimeout  time.Duration
	insecureHTTP bool
}

func (a *app) mcpCmd() *cobra.Command {
	var f mcpFlags
	cmd := &cobra.Command{
		Use:   "mcp [--http [ADDR]] [--keep-sessions | --session NAME]",
		Short: "Serve the sandbox to an AI agent over MCP (stdio, or streamable HTTP)",
		Long: `Runs an MCP server whose tools run in the configured backend (or --sandbox):
  terminal      run a shell command; cd and export carry over; background jobs
  process       list, poll, wait for or kill background jobs
  read_file     read a text file by lines
  write_file    write a file
  sandbox_info  the backend, its isolation and hardening, the approval mode, the tool-call budget

Every call passes the policy gate and is written to the audit log. Dangerous commands are put to
the person through the client (MCP elicitation) when approvals.mode is manual and the client
supports it; otherwise they are refused with a message that says how an operator can allow them.
Tools switched off under tools.* are not offered.

Each MCP session gets its own sandbox session, mcp-<id>, which is removed when the MCP session
ends unless --keep-sessions. With --session NAME, every client of this server uses the sandbox
session mcp-NAME, which is kept: a client that reconnects, or connects to a restarted server with
the same --session, finds its working directory, exports, files and background jobs again
(` + "`hermes-sandbox sessions rm mcp-NAME`" + ` removes it).

By default the server speaks MCP on stdin/stdout. With --http it serves streamable HTTP at
http://ADDR/mcp instead (ADDR defaults to mcp.listen, 127.0.0.1:8765). A non-loopback ADDR needs a
bearer token, from $HERMES_SANDBOX_MCP_TOKEN (preferred: a flag is visible in the process list)
or --token; a token, if given, is required on loopback too.`,
		Example: `  hermes-sandbox mcp                                  # stdio, for Claude Code, Cursor, …
  hermes-sandbox mcp --sandbox docker --keep-sessions
  hermes-sandbox mcp --sandbox docker --session myagent   # reattach to mcp-myagent after a restart
  hermes-sandbox mcp --http                           # http://127.0.0.1:8765/mcp
  HERMES_SANDBOX_MCP_TOKEN=$(openssl rand -hex 32) hermes-sandbox mcp --http 0.0.0.0:8765`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				// `--http ADDR`: the optional flag value arrives as an argument.
				if !cmd.Flags().Changed("http") || f.http != httpFromConfig {
					return usagef("mcp: unexpected argument %q (did you mean --http %s?)", args[0], args[0])
				}
				f.http = args[0]
			}
			return a.runMCP(cmd, f)
		},
	}
	cmd.AddCommand(a.mcpKeysCmd())
	fl := cmd.Flags()
	fl.StringVar(&f.http, "http", "", "serve streamable HTTP on ADDR (default mcp.listen) instead of stdio")
	fl.Lookup("http").NoOptDefVal = httpFromConfig
	fl.StringVar(&f.token, "token", "", "bearer token HTTP clients must send (prefer $"+mcpserver.TokenEnv+")")
	fl.BoolVar(&f.keepSessions, "keep-sessions", false, "keep each MCP session's sandbox session (files, jobs, shell state) after it ends")
	fl.StringVar(&f.session, "session", "", "serve every client from the kept sandbox session mcp-NAME, so a client can reattach to it after a reconnect or a restart")
	fl.BoolVar(&f.insecureHTTP, "insecure-http", false, "serve bearer keys over plain HTTP on a non-loopback address (only behind a proxy that terminates TLS)")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 0, "end an HTTP session, and its sandbox session, after this long without requests (default mcp.session_idle_timeout; 0 = never)")
	return cmd
}

func (a *app) runMCP(cmd *cobra.Command, f mcpFlags) error {
	ctx := cmd.Context()
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	token := f.token
	if token == "" {
		token = a.getenv(mcpserver.TokenEnv)
	}
	addr := f.http
	if addr == httpFromConfig {
		addr = cfg.MCP.Listen
	}
	if addr != "" {
		// Check before building the backend, which may start containers.
		if err := mcpserver.CheckListen(addr, token); err != nil {
			return usageError{err}
		}
		keys, err := mcpserver.ReadKeys(mcpserver.KeysPath(a.configPath()))
		if err != nil {
			return err
		}
		if token != "" || len(keys) > 0 {
			if err := mcpserver.CheckTransport(addr, cfg.MCP.TLSCert != "", f.insecureHTTP); err != nil {
				return usageError{err}
			}
		}
	} else if cmd.Flags().Changed("token") {
		return usagef("mcp: --token applies to --http only; stdio needs none")
	}
	if f.idleTimeout < 0 {
		return usagef("mcp: --idle-timeout must not be negative")
	}
	if !cmd.Flags().Changed("idle-timeout") {
		f.idleTimeout = cfg.MCP.SessionIdleTimeout
	}

	// A named session outlives this process; an unnamed one goes with it unless kept.
	a.ephemeral = !f.keepSessions && f.session == ""
	// A server killed hard (SIGKILL, OOM) could not remove its sandboxes: the next one does.
	a.sweepGone = true
	a.egressTap = &egressTap{}
	b, err := a.openGuarded(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	keysFile := mcpserver.KeysPath(a.configPath())
	if addr != "" {
		// A shared server's log is read by machines: one JSON object a line, with the key
		// and the request id of each request.
		logger = slog.New(slog.NewJSONHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	srv, err := mcpserver.New(mcpserver.Options{
		Backend:        b,
		Config:         cfg,
		KeepSessions:   f.keepSessions,
		SessionName:    f.session,
		SessionTimeout: f.idleTimeout,
		MaxSessions:    cfg.MCP.MaxSessions,
		Version:        Version,
		Logger:         logger,
		KeysFile:       keysFile,
		InsecureHTTP:   f.insecureHTTP,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	a.egressTap.set(srv.CountEgress)

	if addr == "" {
		return srv.Serve(ctx, &mcpserver.LineTransport{Reader: readCloser(a.stdin), Writer: nopWriteCloser{a.stdout}})
	}
	return srv.ListenAndServe(ctx, addr, token, func(bound net.Addr) {
		auth := "no token (loopback only)"
		if token != "" {
			auth = "bearer token required"
		}
		if keys, _ := mcpserver.ReadKeys(keysFile); len(keys) > 0 {
			auth = fmt.Sprintf("%d access keys; a key or the admin token required", len(keys))
		}
		u := listenURL(addr, bound)
		if cfg.MCP.TLSCert != "" {
			u = strings.ReplaceAll(u, "http://", "https://")
		}
		fmt.Fprintf(a.stderr, "hermes-sandbox: MCP server on %s (backend %s; %s)\n", u, b.Name(), auth)
	})
}

// listenURL is the address to show for a listener: the host as asked (0.0.0.0 stays 0.0.0.0,
// not Go's [::]), the port as bound, and for an all-interfaces listener a loopback URL to use
// from this machine.
func listenURL(requested string, bound net.Addr) string {
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return "http://" + bound.String() + mcpserver.HTTPPath
	}
	host, _, _ := net.SplitHostPort(requested)
	ip := net.ParseIP(host)
	if host == "" || ip != nil && ip.IsUnspecified() {
		if host == "" {
			host = "0.0.0.0"
		}
		return fmt.Sprintf("http://%s%s (all interfaces; from this machine: http://127.0.0.1:%s%s)",
			net.JoinHostPort(host, port), mcpserver.HTTPPath, port, mcpserver.HTTPPath)
	}
	return "http://" + net.JoinHostPort(host, port) + mcpserver.HTTPPath
}

func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
