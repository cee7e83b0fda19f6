package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
	"github.com/hermes-sandbox/hermes-sandbox/policy"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// env is one server on the local backend behind the real gate, with its audit log.
type env struct {
	t        *testing.T
	cfg      *config.Config
	inner    sandbox.Backend // the local backend, ungated
	backend  sandbox.Backend // what the server uses
	srv      *mcpserver.Server
	work     string // terminal.cwd, the classifier's working tree
	auditLog string
}

type envOptions struct {
	configure    func(*config.Config)
	ungated      bool
	keepSessions bool
	idle         time.Duration // HTTP session timeout
	secrets      []string      // values the gate redacts from output
	// wrap, if set, replaces the local backend with what it returns (before the gate).
	wrap     func(sandbox.Backend) sandbox.Backend
	keysFile string        // Options.KeysFile
	drain    time.Duration // Options.DrainTimeout
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, cfg: config.NewConfig(), work: filepath.Join(dir, "work"), auditLog: filepath.Join(dir, "audit.log")}
	if err := os.MkdirAll(e.work, 0o755); err != nil {
		t.Fatal(err)
	}
	e.cfg.Terminal.Backend = config.BackendLocal
	e.cfg.Terminal.Cwd = e.work
	e.cfg.Terminal.Timeout = 30 * time.Second
	e.cfg.Approvals.Mode = config.ApprovalManual
	e.cfg.Approvals.Timeout = 10 * time.Second
	if o.configure != nil {
		o.configure(e.cfg)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := local.New(e.cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(dir, "state"),
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "SECRET_TOKEN=nope"}}))
	if err != nil {
		t.Fatal(err)
	}
	if o.wrap != nil {
		b = o.wrap(b)
	}
	e.inner, e.backend = b, b
	if !o.ungated {
		log, err := audit.Open(e.auditLog, audit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { log.Close() })
		e.backend = gate.Wrap(b, gate.Options{
			Classifier:   policy.New(policy.Options{WorkDir: e.work, Home: home}),
			Mode:         e.cfg.Approvals.Mode,
			Timeout:      e.cfg.Approvals.Timeout,
			Allowlist:    e.cfg.Approvals.CommandAllowlist,
			Tools:        e.cfg.Tools,
			MaxToolCalls: e.cfg.Loop.MaxToolCalls,
			Audit:        log,
			RedactOutput: audit.NewExactRedactor(o.secrets),
		})
	}
	srv, err := mcpserver.New(mcpserver.Options{Backend: e.backend, Config: e.cfg, KeepSessions: o.keepSessions,
		SessionTimeout: o.idle, Version: "test", KeysFile: o.keysFile, DrainTimeout: o.drain})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	t.Cleanup(func() {
		srv.Close()
		e.backend.Close()
	})
	return e
}

// connect starts one MCP session over in-memory transports; closing the client ends it, and
// the returned wait blocks until the server has cleaned it up.
func (e *env) connect(opts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) (*mcp.ClientSession, func()) {
	e.t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(context.Background(), st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts).Connect(e.t.Context(), ct, sopts)
	if err != nil {
		e.t.Fatalf("Connect: %v", err)
	}
	var once sync.Once
	wait := func() {
		once.Do(func() {
			cs.Close()
			select {
			case err := <-served:
				if err != nil {
					e.t.Errorf("Serve: %v", err)
				}
			case <-time.After(30 * time.Second):
				e.t.Error("Serve did not return after the client closed")
			}
		})
	}
	e.t.Cleanup(wait)
	return cs, wait
}

// call runs a tool and fails the test on a protocol error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s, %v): %v", name, args, err)
	}
	return res
}

// ok runs a tool that must succeed and decodes its structured result into out.
func ok(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res := call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s(%v) failed: %s", name, args, text(res))
	}
	if res.StructuredContent == nil {
		t.Fatalf("%s(%v): no structuredContent", name, args)
	}
	if len(res.Content) == 0 {
		t.Fatalf("%s(%v): no text content", name, args)
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, b, err)
		}
	}
	return res
}

// refused runs a tool that must fail with isError and returns its message.
func refused(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res := call(t, cs, name, args)
	if !res.IsError {
		t.Fatalf("%s(%v) = %s; want isError", name, args, text(res))
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// approver answers elicitations with a fixed action and decision, and remembers the requests.
type approver struct {
	mu       sync.Mutex
	action   string // accept, decline, cancel
	decision string
	asked    []*mcp.ElicitParams
}

func (a *approver) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, req.Params)
	res := &mcp.ElicitResult{Action: a.action}
	if a.action == "accept" {
		res.Content = map[string]any{"decision": a.decision}
	}
	return res, nil
}

func (a *approver) set(action, decision string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.action, a.decision = action, decision
}

func (a *approver) first() *mcp.ElicitParams {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.asked[0]
}

func (a *approver) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.asked)
}

// records reads the audit log.
func (e *env) records() []audit.Record {
	e.t.Helper()
	rs, err := audit.ReadAll(e.auditLog)
	if err != nil {
		e.t.Fatalf("audit.ReadAll: %v", err)
	}
	return rs
}
