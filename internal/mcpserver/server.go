// Package mcpserver exposes a sandbox backend as an MCP server: the terminal, process,
// read_file, write_file and sandbox_info tools, over stdio or streamable HTTP.
//
// The server is a thin mapping onto the sandbox API. It is given an already gated backend
// (gate.Wrap), so every tool call is classified, approved or refused, counted against
// loop.max_tool_calls and audited by the gate; the server only attaches an approver that asks
// the person through MCP elicitation, turns refusals into isError results, and hides the tools
// that the configuration switches off.
//
// Each MCP session gets its own sandbox session, named mcp-<short id>, opened at the session's
// first tool call: the working directory and exported environment persist from one call to the
// next, and concurrent MCP sessions are isolated from each other. When the MCP session ends,
// its sandbox session is closed and removed, unless Options.KeepSessions is set.
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// ProtocolVersions are the MCP protocol versions the server negotiates, newest first.
//
// The stateless 2026-07-28 revision is deliberately left out: this server keeps state per MCP
// session (the sandbox session with its working directory and environment), and it asks for
// approvals with a server-initiated elicitation in the middle of a tool call, which that
// revision replaces with multi-round-trip results. A client that asks for it is answered with
// 2025-11-25 through the usual negotiation.
var ProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// SessionPrefix starts the name of every sandbox session the server opens.
const SessionPrefix = "mcp-"

// Options configure a Server.
type Options struct {
	// Backend runs the tools. It should be gated (gate.Wrap): the server does no policy
	// checks of its own, and refuses tools that the configuration switches off only when the
	// backend's sessions are not gated.
	Backend sandbox.Backend
	// Config supplies approvals.mode, tools.*, loop.max_tool_calls and terminal.timeout and
	// output_limit. Nil means config.NewConfig().
	Config *config.Config
	// KeepSessions keeps each sandbox session (its files, jobs and shell state) after its MCP
	// session ends, instead of removing it; `hermes-sandbox sessions` lists them.
	KeepSessions bool
	// SessionName, when set, names the sandbox session of every MCP session this server
	// serves: SessionPrefix+SessionName. A client that reconnects (or connects to a restarted
	// server) with the same name finds its working directory, exports, files and background
	// jobs again; servers with different names never share a sandbox session. A named
	// session is kept when its MCP session ends (as with KeepSessions); `hermes-sandbox
	// sessions rm mcp-NAME` removes it.
	SessionName string
	// SessionTimeout closes an HTTP session, and so its sandbox session, after this long
	// without a request; 0 means never.
	SessionTimeout time.Duration
	// MaxSessions caps the MCP sessions that hold a sandbox session at once: a tool call
	// from one more session fails (ErrLimit, naming mcp.max_sessions) until another ends.
	// 0 means Config's mcp.max_sessions.
	MaxSessions int
	// Version is reported to clients as the server version.
	Version string
	// Logger may be nil (discard).
	Logger *slog.Logger

	// KeysFile is the access keys file (KeysPath); "" means no keys. Once it holds a key,
	// every HTTP request needs a key or the admin token.
	KeysFile string
	// DrainTimeout is how long ListenAndServe lets running tool calls finish once its
	// context is done; 0 means Config's mcp.drain_timeout.
	DrainTimeout time.Duration
	// TLSCert and TLSKey make ListenAndServe serve HTTPS; default Config's mcp.tls_*.
	TLSCert, TLSKey string
	// InsecureHTTP allows a bearer key over plain HTTP on a non-loopback address.
	InsecureHTTP bool
}

// Server serves one backend over MCP. It is safe for concurrent use; Close ends every session.
type Server struct {
	opts    Options
	cfg     *config.Config
	backend sandbox.Backend
	caps    sandbox.Capabilities
	log     *slog.Logger
	mcp     *mcp.Server

	mu       sync.Mutex
	closed   bool                            // guarded by mu
	sessions map[*mcp.ServerSession]*session // guarded by mu
	// transports names the transport of sessions served through Serve ("stdio", …).
	transports map[*mcp.ServerSession]string // guarded by mu
	wg         sync.WaitGroup                // one per session watcher

	keys     *keyStore // nil without Options.KeysFile
	binds    bindings
	limits   limiter
	admits   admissions // tool calls admitted at the HTTP front door
	metrics  *metrics
	inflight inflightCounter
	posts    inflightCounter // HTTP POSTs being answered
	draining atomic.Bool
}

// New builds a server for opts.Backend. It starts nothing: call Serve, Handler or
// ListenAndServe.
func New(opts Options) (*Server, error) {
	if opts.Backend == nil {
		return nil, fmt.Errorf("mcp server: no backend: %w", sandbox.ErrInvalidConfig)
	}
	if opts.SessionName != "" {
		if err := sandbox.ValidateSessionName(SessionPrefix + opts.SessionName); err != nil {
			return nil, fmt.Errorf("mcp server: session name %q: %w", opts.SessionName, err)
		}
		opts.KeepSessions = true
	}
	cfg := opts.Config
	if cfg == nil {
		cfg = config.NewConfig()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	s := &Server{
		opts:       opts,
		cfg:        cfg,
		backend:    opts.Backend,
		caps:       opts.Backend.Capabilities(),
		log:        log.With("component", "mcp", "backend", opts.Backend.Name()),
		sessions:   map[*mcp.ServerSession]*session{},
		transports: map[*mcp.ServerSession]string{},
		metrics:    newMetrics(),
	}
	if opts.KeysFile != "" {
		ks, err := newKeyStore(opts.KeysFile)
		if err != nil {
			return nil, err
		}
		s.keys = ks
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "hermes-sandbox", Title: "Hermes Sandbox", Version: version},
		&mcp.ServerOptions{
			Instructions:              s.instructions(),
			Logger:                    s.log,
			SupportedProtocolVersions: ProtocolVersions,
			// No logging capability: the server sends no log notifications.
			Capabilities: &mcp.ServerCapabilities{},
		})
	if p, ok := opts.Backend.(sandbox.PoolReporter); ok {
		s.metrics.reg.MustRegister(newPoolCollector(opts.Backend.Name(), p))
	}
	s.addTools()
	s.mcp.AddReceivingMiddleware(s.hideDisabled, s.keyGate)
	return s, nil
}

// MCPServer returns the underlying SDK server, for callers with their own transports.
func (s *Server) MCPServer() *mcp.Server { return s.mcp }

// Serve runs one MCP session over t (for example &mcp.StdioTransport{}) until the client
// disconnects or ctx is done, then closes the session's sandbox session (and removes it, unless
// KeepSessions) before returning. A client that simply goes away is not an error.
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcp: connect: %w", err)
	}
	s.mu.Lock()
	s.transports[ss] = transportName(t)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.transports, ss)
		s.mu.Unlock()
	}()
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		ss.Close()
		<-done
		err = nil
	}
	s.endSession(ss)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, mcp.ErrConnectionClosed) {
		err = nil
	}
	return err
}

// CountEgress counts one decision of the backend's egress proxy in the metrics, under the key
// whose MCP session owns the sandbox session that connected. Install it beside the audit
// log's observer (sandbox.EgressObserver); it is safe for concurrent use.
func (s *Server) CountEgress(ev sandbox.EgressEvent) {
	decision := ev.Decision
	if decision != "allowed" && decision != "denied" {
		decision = "other" // a bounded label, whatever the proxy reports
	}
	key := ""
	s.mu.Lock()
	for _, st := range s.sessions {
		if st.name == ev.Session {
			key = st.key
			break
		}
	}
	s.mu.Unlock()
	s.metrics.egress.WithLabelValues(key, s.backend.Name(), decision).Inc()
}

// transportName names a transport for the audit log.
func transportName(t mcp.Transport) string {
	switch t.(type) {
	case *mcp.StdioTransport, *mcp.IOTransport, *LineTransport:
		return "stdio"
	case *mcp.InMemoryTransport:
		return "in-memory"
	}
	return fmt.Sprintf("%T", t)
}

// Close ends every MCP session and waits until each sandbox session is closed (and removed,
// unless KeepSessions). It does not close the backend, which belongs to the caller.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	for ss := range s.mcp.Sessions() {
		ss.Close()
	}
	s.wg.Wait()
	return nil
}

// session is the sandbox side of one MCP session.
type session struct {
	ss   *mcp.ServerSession
	name string
	key  string // the key that opened it, for the active-sessions gauge

	openMu sync.Mutex      // serialises opening the sandbox session
	sb     sandbox.Session // guarded by openMu

	mu      sync.Mutex
	ended   bool                       // guarded by mu
	next    int                        // guarded by mu
	cancels map[int]context.CancelFunc // guarded by mu; in-flight tool calls
	calls   sync.WaitGroup

	cleanup sync.Once
	done    chan struct{} // closed when the sandbox session is closed and removed
}

// acquire returns the state of the tool call's MCP session and a context for the call that is
// cancelled when the session ends. release must be called when the tool call is done.
func (s *Server) acquire(ctx context.Context, ss *mcp.ServerSession) (*session, context.Context, func(), error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, nil, fmt.Errorf("mcp server: shutting down: %w", sandbox.ErrClosed)
	}
	st, ok := s.sessions[ss]
	if !ok {
		if limit := s.maxSessions(); len(s.sessions) >= limit {
			s.mu.Unlock()
			return nil, nil, nil, fmt.Errorf("%d MCP sessions are open, the limit (mcp.max_sessions): end one (or wait for an idle one to time out) and try again: %w", limit, sandbox.ErrLimit)
		}
		name := SessionPrefix + shortID()
		if s.opts.SessionName != "" {
			name = SessionPrefix + s.opts.SessionName
		}
		st = &session{ss: ss, name: name, cancels: map[int]context.CancelFunc{},
			done: make(chan struct{}), key: identityFrom(ctx).name}
		s.sessions[ss] = st
		s.metrics.sessions.WithLabelValues(st.key).Inc()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ss.Wait()
			s.endSession(ss)
		}()
	}
	s.mu.Unlock()

	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		return nil, nil, nil, fmt.Errorf("mcp session ended: %w", sandbox.ErrClosed)
	}
	cctx, cancel := context.WithCancel(ctx)
	id := st.next
	st.next++
	st.cancels[id] = cancel
	st.calls.Add(1)
	release := func() {
		st.mu.Lock()
		delete(st.cancels, id)
		st.mu.Unlock()
		cancel()
		st.calls.Done()
	}
	return st, cctx, release, nil
}

// maxSessions is the cap on sessions with a sandbox.
func (s *Server) maxSessions() int {
	if s.opts.MaxSessions > 0 {
		return s.opts.MaxSessions
	}
	if s.cfg.MCP.MaxSessions > 0 {
		return s.cfg.MCP.MaxSessions
	}
	return config.NewConfig().MCP.MaxSessions
}

// endSession cancels the session's tool calls, waits for them, then closes the sandbox
// session and removes it unless KeepSessions. It runs once per session; later calls wait for
// the first.
func (s *Server) endSession(ss *mcp.ServerSession) {
	s.mu.Lock()
	st := s.sessions[ss]
	s.mu.Unlock()
	if st == nil {
		return
	}
	st.cleanup.Do(func() {
		defer close(st.done)
		st.mu.Lock()
		st.ended = true
		for _, cancel := range st.cancels {
			cancel()
		}
		st.mu.Unlock()
		st.calls.Wait()

		st.openMu.Lock()
		sb := st.sb
		st.sb = nil
		st.openMu.Unlock()
		if sb != nil {
			if err := sb.Close(); err != nil {
				s.log.Warn("close sandbox session", "session", st.name, "err", err)
			}
			if !s.opts.KeepSessions {
				s.removeSandbox(st.name)
			}
		}
		s.mu.Lock()
		delete(s.sessions, ss)
		s.mu.Unlock()
		s.metrics.sessions.WithLabelValues(st.key).Dec()
	})
	<-st.done
}

// removeSandbox destroys a sandbox session; it runs after the client has gone, so it has its
// own deadline.
func (s *Server) removeSandbox(name string) {
	m, ok := s.backend.(sandbox.SessionManager)
	if !ok {
		s.log.Info("backend cannot remove sessions; keeping it", "session", name)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := m.Remove(ctx, name); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		s.log.Warn("remove sandbox session", "session", name, "err", err)
	}
}

// sandbox returns the session's sandbox session, opening it on first use.
func (st *session) sandbox(ctx context.Context, b sandbox.Backend) (sandbox.Session, error) {
	st.openMu.Lock()
	defer st.openMu.Unlock()
	if st.sb != nil {
		return st.sb, nil
	}
	sb, err := b.Open(ctx, st.name)
	if err != nil {
		return nil, err
	}
	st.sb = sb
	return sb, nil
}

// call is the common start of every tool that touches the sandbox: it finds the session,
// opens its sandbox and attaches the approver. The returned context must be used for the
// call, and release called when it is done.
func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest) (sandbox.Session, context.Context, func(), error) {
	st, cctx, release, err := s.acquire(ctx, req.Session)
	if err != nil {
		return nil, nil, nil, err
	}
	sb, err := st.sandbox(cctx, s.backend)
	if err != nil {
		release()
		return nil, nil, nil, fmt.Errorf("open sandbox session %s on %s: %w", st.name, s.backend.Name(), err)
	}
	who := identityFrom(ctx)
	switch {
	case who.key != nil && who.key.Approvals == KeyApprovalsDeny:
		cctx = gate.WithApprover(cctx, denyApprover{})
	case canElicit(req.Session):
		cctx = gate.WithApprover(cctx, &elicitApprover{ss: req.Session})
	}
	cctx = gate.WithCaller(cctx, gate.Caller{Client: clientName(req.Session), Transport: s.transportOf(req.Session), Key: who.name})
	return sb, cctx, release, nil
}

// clientName is the name the MCP client gave when it connected.
func clientName(ss *mcp.ServerSession) string {
	if ss == nil {
		return ""
	}
	if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
		return p.ClientInfo.Name
	}
	return ""
}

// transportOf names how a session reaches the server: what Serve was given, else the
// streamable HTTP handler.
func (s *Server) transportOf(ss *mcp.ServerSession) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.transports[ss]; ok {
		return t
	}
	return "http"
}

// redact hides known secrets in text that leaves the server outside a tool result (the
// gated backend redacts results itself).
func (s *Server) redact(text string) string {
	if r, ok := s.backend.(interface{ Redact(string) string }); ok {
		return r.Redact(text)
	}
	return text
}

func shortID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// toolEnabled reports whether the tools.* switches a tool needs are on, and names those that are off.
func (s *Server) toolEnabled(name string) (ok bool, switches []string) {
	t := s.cfg.Tools
	need := func(on bool, sw string) {
		if !on {
			switches = append(switches, sw)
		}
	}
	switch name {
	case toolTerminal:
		need(t.ShellExecute, "shell_execute")
	case toolProcess, toolSession:
		need(t.ShellExecute, "shell_execute")
	case toolReadFile:
		need(t.FileSystem, "file_system")
	case toolWriteFile:
		need(t.FileSystem, "file_system")
		need(t.FileWrite, "file_write")
	}
	return len(switches) == 0, switches
}

// listed reports whether a tool shows in tools/list: switched on, and the backend can do it.
func (s *Server) listed(name string) bool {
	if ok, _ := s.toolEnabled(name); !ok {
		return false
	}
	switch name {
	case toolProcess:
		return s.caps.Jobs
	case toolReadFile, toolWriteFile:
		return s.caps.Files
	case toolSession:
		return s.caps.Branching
	}
	return true
}

// hideDisabled removes switched-off tools from tools/list. A call to one still reaches its
// handler, where the gate refuses it and records the refusal.
func (s *Server) hideDisabled(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/list" || err != nil {
			return res, err
		}
		if lr, ok := res.(*mcp.ListToolsResult); ok {
			lr.Tools = slices.DeleteFunc(slices.Clone(lr.Tools), func(t *mcp.Tool) bool { return !s.listed(t.Name) })
		}
		return res, err
	}
}

// checkEnabled refuses a switched-off tool when the session is not gated; a gated session
// refuses it itself, and records the refusal in the audit log.
func (s *Server) checkEnabled(sb sandbox.Session, name string) error {
	ok, switches := s.toolEnabled(name)
	if ok {
		return nil
	}
	if _, gated := sb.(gate.Budget); gated {
		return nil
	}
	return &gate.RefusedError{Tool: name, Reason: "tool-disabled",
		Hint: fmt.Sprintf("an operator can enable it with `hermes-sandbox config set tools.%s true`", switches[0])}
}

// remaining reports the session's tool-call budget: -1 unlimited; ok false when the session
// is not gated and so nothing counts.
func remaining(sb sandbox.Session) (n int, ok bool) {
	if b, ok := sb.(gate.Budget); ok {
		return b.RemainingCalls(), true
	}
	return 0, false
}

// instructions tell the model where its commands run and what that means.
func (s *Server) instructions() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Hermes Sandbox runs your shell commands in the %q sandbox backend. %s\n\n", s.backend.Name(), s.where())
	b.WriteString("Persistence: this MCP session has its own sandbox session. The working directory and exported " +
		"environment variables carry over from one terminal call to the next, as in an interactive terminal, " +
		"and files you create persist for the whole session")
	if s.opts.KeepSessions {
		b.WriteString(" and are kept after it ends.\n\n")
	} else {
		b.WriteString("; the sandbox session is removed when this MCP session ends.\n\n")
	}
	b.WriteString("Safety: every call passes a policy gate and is written to an audit log. Hardline commands " +
		"(such as rm -rf / or a fork bomb) are always refused. Dangerous commands need a person's approval")
	switch s.cfg.Approvals.Mode {
	case config.ApprovalManual:
		b.WriteString(" (approvals.mode manual: the person is asked through your MCP client if it supports " +
			"elicitation; otherwise the call is refused)")
	case config.ApprovalDeny:
		b.WriteString(" (approvals.mode deny: they are refused without asking)")
	case config.ApprovalOff:
		b.WriteString(" (approvals.mode off: they run without asking)")
	}
	b.WriteString(". A refused call returns an error result that says why and what an operator can change; " +
		"do not try to work around it.")
	if n := s.cfg.Loop.MaxToolCalls; n > 0 {
		fmt.Fprintf(&b, " This session may make at most %d tool calls (loop.max_tool_calls).", n)
	}
	b.WriteString("\n\nCall sandbox_info for the backend, its hardening, the approval mode and the remaining tool-call budget.")
	return b.String()
}

// where is one or two sentences on isolation and network, for instructions and descriptions.
func (s *Server) where() string {
	iso := s.caps.Isolation
	if iso == "" {
		iso = "not described by the backend"
	}
	net := "Commands cannot reach the network."
	if s.caps.Network {
		net = "Commands can reach the network."
	}
	return fmt.Sprintf("Isolation: %s. %s", strings.TrimSuffix(iso, "."), net)
}
