package mcpserver_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// TestMain removes the binary the end-to-end tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveBuilt()
	os.Exit(code)
}

// binary builds cmd/hermes-sandbox once per test process.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping the end-to-end test in -short mode")
	}
	// Built as the Makefile builds it (static), as users run it.
	return testenv.BuildBinary(t, "./cmd/hermes-sandbox")
}

// e2eEnv is a config, state and working tree for one spawned server.
type e2eEnv struct {
	bin, work, state, auditLog string
	environ                    []string
}

func newE2E(t *testing.T, maxCalls int) *e2eEnv {
	t.Helper()
	dir := t.TempDir()
	e := &e2eEnv{bin: binary(t), work: filepath.Join(dir, "work"), state: filepath.Join(dir, "state"),
		auditLog: filepath.Join(dir, "audit", "audit.log")}
	home := filepath.Join(dir, "home")
	for _, d := range []string{e.work, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "config", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("terminal:\n  backend: local\n  cwd: %s\n  timeout: 60s\napprovals:\n  mode: manual\n  timeout: 30s\n"+
		"loop:\n  max_tool_calls: %d\naudit:\n  log_destination: %s\n", e.work, maxCalls, e.auditLog)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	e.environ = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HERMES_SANDBOX_CONFIG=" + cfgPath,
		"XDG_STATE_HOME=" + e.state, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config")}
	return e
}

func (e *e2eEnv) command(args ...string) *exec.Cmd {
	cmd := exec.Command(e.bin, append([]string{"mcp", "--sandbox", "local"}, args...)...)
	cmd.Env = e.environ
	return cmd
}

// sessionDir is where the local backend keeps a session's state.
func (e *e2eEnv) sessionDir(name string) string {
	return filepath.Join(e.state, "hermes-sandbox", "local", name)
}

// checkAudit verifies the log's hash chain and that it holds a record per tool call.
func (e *e2eEnv) checkAudit(t *testing.T, session string, wantCommands ...string) {
	t.Helper()
	rep, err := audit.Verify(e.auditLog)
	if err != nil {
		t.Fatalf("audit.Verify: %v", err)
	}
	if p := rep.First(); p != nil {
		t.Errorf("audit log does not verify: %v", rep)
	}
	rs, err := audit.ReadAll(e.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	rs = audit.FilterSession(rs, session)
	for _, want := range wantCommands {
		found := false
		for _, r := range rs {
			found = found || strings.Contains(r.Command, want)
		}
		if !found {
			t.Errorf("audit log has no record of %q for session %s (%d records)", want, session, len(rs))
		}
	}
}

func TestE2EStdio(t *testing.T) {
	e := newE2E(t, 0)
	cmd := e.command()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ap := &approver{action: "accept", decision: "once"}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: ap.handle}).
		Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect over stdio: %v\nstderr: %s", err, stderr.String())
	}
	closed := false
	defer func() {
		if !closed {
			cs.Close()
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	}()

	// Handshake and tools.
	if got := cs.InitializeResult().ServerInfo.Name; got != "hermes-sandbox" {
		t.Errorf("server name %q", got)
	}
	if got := toolNames(t, cs); strings.Join(got, ",") != strings.Join(allTools, ",") {
		t.Errorf("tools = %v; want %v", got, allTools)
	}
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	if info.Backend != "local" || !info.PolicyGate || !info.Elicitation || info.ApprovalMode != "manual" {
		t.Errorf("sandbox_info = %+v", info)
	}
	// local cannot filter egress, and says so rather than pretend.
	if info.Egress.Status != "not available" || !strings.Contains(info.Egress.Detail, "not available") {
		t.Errorf("sandbox_info egress = %+v; want not available", info.Egress)
	}

	// A command, and cwd and env persisting.
	var out mcpserver.TerminalResult
	ok(t, cs, "terminal", map[string]any{"command": "mkdir -p proj && cd proj && export STEP=two && echo hello"}, &out)
	if out.Stdout != "hello\n" || *out.ExitCode != 0 {
		t.Fatalf("first command = %+v", out)
	}
	ok(t, cs, "terminal", map[string]any{"command": "pwd; echo $STEP"}, &out)
	if want := filepath.Join(e.work, "proj") + "\ntwo\n"; out.Stdout != want {
		t.Errorf("persistence: stdout %q; want %q", out.Stdout, want)
	}

	// A file round trip, relative to the session's cwd.
	ok(t, cs, "write_file", map[string]any{"path": "hello.py", "content": "print('hi')\n"}, nil)
	var r mcpserver.ReadFileResult
	ok(t, cs, "read_file", map[string]any{"path": "hello.py"}, &r)
	if r.Content != "print('hi')\n" {
		t.Errorf("read back %q", r.Content)
	}
	if b, err := os.ReadFile(filepath.Join(e.work, "proj", "hello.py")); err != nil || string(b) != "print('hi')\n" {
		t.Errorf("file on disk: %q %v", b, err)
	}

	// A background job.
	ok(t, cs, "terminal", map[string]any{"command": "echo job-out; sleep 0.3", "background": true}, &out)
	var p mcpserver.ProcessResult
	ok(t, cs, "process", map[string]any{"action": "wait", "id": out.JobID}, &p)
	if p.Job == nil || p.Job.Running {
		t.Errorf("wait = %+v", p)
	}
	var polled mcpserver.ProcessResult
	ok(t, cs, "process", map[string]any{"action": "poll", "id": out.JobID}, &polled)
	if !strings.Contains(p.Stdout+polled.Stdout, "job-out") {
		t.Errorf("job output %q", p.Stdout+polled.Stdout)
	}

	// A hardline command is refused without asking.
	if msg := refused(t, cs, "terminal", map[string]any{"command": "rm -rf /"}); !strings.Contains(msg, "hardline") {
		t.Errorf("hardline refusal: %s", msg)
	}
	if ap.count() != 0 {
		t.Errorf("asked about a hardline command")
	}

	// Elicitation: approve, then decline.
	ok(t, cs, "terminal", map[string]any{"command": "mkdir -p d"}, nil)
	ok(t, cs, "terminal", map[string]any{"command": dangerous}, nil)
	ap.set("decline", "")
	if msg := refused(t, cs, "terminal", map[string]any{"command": dangerous}); !strings.Contains(msg, "command_allowlist") {
		t.Errorf("declined: %s", msg)
	}
	if ap.count() != 2 {
		t.Errorf("asked %d times; want 2", ap.count())
	}

	// Closing the client ends the server, which removes the sandbox session.
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	closed = true
	if _, err := os.Stat(e.sessionDir(info.Session)); !os.IsNotExist(err) {
		t.Errorf("session directory %s still exists (%v)", e.sessionDir(info.Session), err)
	}
	e.checkAudit(t, info.Session, "mkdir -p proj", "pwd; echo $STEP", "hello.py", "echo job-out", "rm -rf /", dangerous)
}

func TestE2EHTTP(t *testing.T) {
	const token = "e2e-token-0123456789abcdef"
	e := newE2E(t, 4)
	cmd := e.command("--http", "127.0.0.1:0")
	cmd.Env = append(cmd.Env, mcpserver.TokenEnv+"="+token)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var logMu sync.Mutex
	var log strings.Builder
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`http://\S+/mcp`)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if u := re.FindString(sc.Text()); u != "" {
				urlc <- u
			}
		}
		exited <- cmd.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			logMu.Lock()
			t.Logf("server stderr:\n%s", log.String())
			logMu.Unlock()
		}
	})
	var url string
	select {
	case url = <-urlc:
	case err := <-exited:
		t.Fatalf("server exited early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not report its address")
	}

	// A wrong or missing token is rejected before MCP sees the request.
	for _, auth := range []string{"", "Bearer not-the-token-0123456789"} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(`{}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("auth %q: status %d, WWW-Authenticate %q; want 401 with a challenge", auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if _, err := httpClient(t, url, "not-the-token-0123456789", nil); err == nil {
		t.Error("connected with a wrong token")
	}

	// A client asking for an older protocol version gets it.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"protocolVersion":"2025-03-26"`) {
		t.Errorf("initialize 2025-03-26: status %d body %s", resp.StatusCode, body)
	}

	// The right token: a session with a budget of 4 tool calls.
	cs, err := httpClient(t, url, token, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	if info.MaxToolCalls != 4 || info.RemainingToolCalls != 4 {
		t.Errorf("budget = %d of %d; want 4 of 4", info.RemainingToolCalls, info.MaxToolCalls)
	}
	var out mcpserver.TerminalResult
	ok(t, cs, "terminal", map[string]any{"command": "cd / && echo one"}, &out)
	ok(t, cs, "terminal", map[string]any{"command": "pwd"}, &out)
	if out.Stdout != "/\n" {
		t.Errorf("cwd over HTTP = %q; want /", out.Stdout)
	}
	// Without elicitation, a dangerous command is refused, and still counts.
	if msg := refused(t, cs, "terminal", map[string]any{"command": dangerous}); !strings.Contains(msg, "elicitation") {
		t.Errorf("no-elicitation refusal: %s", msg)
	}
	ok(t, cs, "write_file", map[string]any{"path": filepath.Join(e.work, "notes.txt"), "content": "x"}, nil)
	if msg := refused(t, cs, "terminal", map[string]any{"command": "echo five"}); !strings.Contains(msg, "max_tool_calls") {
		t.Errorf("over the cap: %s", msg)
	}
	ok(t, cs, "sandbox_info", nil, &info)
	if info.RemainingToolCalls != 0 {
		t.Errorf("remaining = %d; want 0", info.RemainingToolCalls)
	}

	// Interrupting the server ends its sessions and removes their sandboxes.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("server exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server did not stop on SIGINT")
	}
	if _, err := os.Stat(e.sessionDir(info.Session)); !os.IsNotExist(err) {
		t.Errorf("session directory %s still exists (%v)", e.sessionDir(info.Session), err)
	}
	e.checkAudit(t, info.Session, "cd / && echo one", dangerous, "notes.txt", "echo five")
}
