package mcpserver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// dangerous needs approval but harms nothing in the test's working tree.
const dangerous = "chmod -R 777 d"

// allTools is what the local backend offers: it runs jobs, has files and branches.
var allTools = []string{"process", "read_file", "sandbox_info", "session", "terminal", "write_file"}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func TestHandshakeAndTools(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, _ := e.connect(nil, nil)
	init := cs.InitializeResult()
	if init.ServerInfo.Name != "hermes-sandbox" {
		t.Errorf("server name = %q; want hermes-sandbox", init.ServerInfo.Name)
	}
	if init.ProtocolVersion != mcpserver.ProtocolVersions[0] {
		t.Errorf("negotiated %q; want %q", init.ProtocolVersion, mcpserver.ProtocolVersions[0])
	}
	for _, want := range []string{`"local" sandbox backend`, "Isolation: namespaces", "can reach the network", "persist", "approvals.mode manual"} {
		if !strings.Contains(init.Instructions, want) {
			t.Errorf("instructions lack %q:\n%s", want, init.Instructions)
		}
	}
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(t, cs); !slices.Equal(got, allTools) {
		t.Errorf("tools = %v; want %v", got, allTools)
	}
	for _, tool := range res.Tools {
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("tool %s: description, input or output schema missing", tool.Name)
		}
		if tool.Name == "terminal" && !strings.Contains(tool.Description, "backend local") {
			t.Errorf("terminal description does not name the backend: %s", tool.Description)
		}
		if tool.Name == "read_file" && !strings.Contains(tool.Description, "1-based") {
			t.Errorf("read_file description does not say offset counts lines: %s", tool.Description)
		}
	}
}

// A client asking for an older protocol version that the server supports gets it.
func TestVersionNegotiation(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, v := range []string{"2025-06-18", "2025-03-26", "2024-11-05"} {
		cs, wait := e.connect(nil, &mcp.ClientSessionOptions{ProtocolVersion: v})
		if got := cs.InitializeResult().ProtocolVersion; got != v {
			t.Errorf("asked for %s, negotiated %s", v, got)
		}
		var out mcpserver.TerminalResult
		ok(t, cs, "terminal", map[string]any{"command": "echo hi"}, &out)
		if out.Stdout != "hi\n" {
			t.Errorf("%s: stdout = %q; want hi", v, out.Stdout)
		}
		wait()
	}
}

func TestUnknownTool(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, _ := e.connect(nil, nil)
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("CallTool(no_such_tool) error = %v; want a JSON-RPC invalid-params error", err)
	}
}

func TestTerminalPersistsCwdAndEnv(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, _ := e.connect(nil, nil)
	var out mcpserver.TerminalResult
	res := ok(t, cs, "terminal", map[string]any{"command": "mkdir -p sub && cd sub && export HS_X=42 && echo set"}, &out)
	if out.ExitCode == nil || *out.ExitCode != 0 || out.Cwd != filepath.Join(e.work, "sub") {
		t.Fatalf("first command: exit %v cwd %q; want 0 and %s", out.ExitCode, out.Cwd, filepath.Join(e.work, "sub"))
	}
	if txt := text(res); !strings.Contains(txt, "set") || !strings.Contains(txt, "[exit code 0; cwd ") {
		t.Errorf("text = %q", txt)
	}
	ok(t, cs, "terminal", map[string]any{"command": "pwd; echo $HS_X; echo oops >&2; exit 3"}, &out)
	if want := filepath.Join(e.work, "sub") + "\n42\n"; out.Stdout != want || out.Stderr != "oops\n" || *out.ExitCode != 3 {
		t.Errorf("second command: stdout %q stderr %q exit %d; want %q, oops, 3", out.Stdout, out.Stderr, *out.ExitCode, want)
	}
	// workdir moves the session like a cd.
	ok(t, cs, "terminal", map[string]any{"command": "pwd", "workdir": e.work}, &out)
	ok(t, cs, "terminal", map[string]any{"command": "pwd"}, &out)
	if out.Stdout != e.work+"\n" {
		t.Errorf("after workdir: pwd = %q; want %s", out.Stdout, e.work)
	}
	// A timeout kills the command and says so.
	res = ok(t, cs, "terminal", map[string]any{"command": "sleep 5", "timeout": 0.3}, &out)
	if *out.ExitCode != sandbox.ExitTimeout || !out.TimedOut || !strings.Contains(text(res), "timed out") {
		t.Errorf("timeout: exit %d timed_out %v text %q; want 124", *out.ExitCode, out.TimedOut, text(res))
	}
	if msg := refused(t, cs, "terminal", map[string]any{"command": "true", "timeout": -1}); !strings.Contains(msg, "positive") {
		t.Errorf("negative timeout: %s", msg)
	}
}

func TestSessionsIsolatedAndRemoved(t *testing.T) {
	e := newEnv(t, envOptions{})
	a, waitA := e.connect(nil, nil)
	b, _ := e.connect(nil, nil)
	var info mcpserver.InfoResult
	ok(t, a, "sandbox_info", nil, &info)
	nameA := info.Session
	ok(t, b, "sandbox_info", nil, &info)
	if nameA == info.Session || !strings.HasPrefix(nameA, mcpserver.SessionPrefix) {
		t.Fatalf("sessions %q and %q; want distinct mcp-… names", nameA, info.Session)
	}
	var out mcpserver.TerminalResult
	ok(t, a, "terminal", map[string]any{"command": "cd /tmp && export ONLY_A=1"}, &out)
	ok(t, b, "terminal", map[string]any{"command": "pwd; echo ${ONLY_A:-unset}"}, &out)
	if out.Stdout != e.work+"\nunset\n" {
		t.Errorf("session b sees %q; want its own cwd and no ONLY_A", out.Stdout)
	}
	if !hasSession(t, e.inner, nameA) {
		t.Fatalf("session %s not found while open", nameA)
	}
	waitA()
	if hasSession(t, e.inner, nameA) {
		t.Errorf("session %s still exists after its MCP session ended", nameA)
	}
}

func TestKeepSessions(t *testing.T) {
	e := newEnv(t, envOptions{keepSessions: true})
	cs, wait := e.connect(nil, nil)
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	if !info.KeepSession {
		t.Error("keep_session = false; want true")
	}
	ok(t, cs, "terminal", map[string]any{"command": "true"}, nil)
	wait()
	if !hasSession(t, e.inner, info.Session) {
		t.Errorf("session %s removed despite KeepSessions", info.Session)
	}
}

func hasSession(t *testing.T, b sandbox.Backend, name string) bool {
	t.Helper()
	infos, err := b.(sandbox.SessionManager).Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(infos, func(i sandbox.SessionInfo) bool { return i.Name == name })
}

func TestFileRoundTrip(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, _ := e.connect(nil, nil)
	content := "line 1\nline 2\nline 3 ünïcødé\nline 4"
	var w mcpserver.WriteFileResult
	ok(t, cs, "write_file", map[string]any{"path": "dir/notes.txt", "content": content}, &w)
	if w.BytesWritten != len(content) {
		t.Errorf("bytes_written = %d; want %d", w.BytesWritten, len(content))
	}
	if b, err := os.ReadFile(filepath.Join(e.work, "dir", "notes.txt")); err != nil || string(b) != content {
		t.Fatalf("file on disk = %q, %v; want %q", b, err, content)
	}
	var r mcpserver.ReadFileResult
	res := ok(t, cs, "read_file", map[string]any{"path": "dir/notes.txt"}, &r)
	if r.Content != content || r.TotalLines != 4 || r.StartLine != 1 || r.EndLine != 4 || r.Truncated {
		t.Errorf("read all = %+v", r)
	}
	if res.Content[0].(*mcp.TextContent).Text != content {
		t.Errorf("first text block = %q; want the file", res.Content[0].(*mcp.TextContent).Text)
	}
	ok(t, cs, "read_file", map[string]any{"path": filepath.Join(e.work, "dir/notes.txt"), "offset": 2, "limit": 2}, &r)
	if r.Content != "line 2\nline 3 ünïcødé\n" || r.StartLine != 2 || r.EndLine != 3 || !r.Truncated || r.NextOffset != 4 {
		t.Errorf("read lines 2-3 = %+v", r)
	}
	ok(t, cs, "read_file", map[string]any{"path": "dir/notes.txt", "offset": 9}, &r)
	if r.Content != "" || r.TotalLines != 4 {
		t.Errorf("read past the end = %+v", r)
	}
	// A file written by a command is readable, and relative paths follow the session's cwd.
	ok(t, cs, "terminal", map[string]any{"command": "cd dir && printf 'a\\0b' > bin"}, nil)
	if msg := refused(t, cs, "read_file", map[string]any{"path": "bin"}); !strings.Contains(msg, "binary") {
		t.Errorf("binary read: %s", msg)
	}
	if msg := refused(t, cs, "read_file", map[string]any{"path": "missing.txt"}); !strings.Contains(msg, "missing.txt") {
		t.Errorf("missing file: %s", msg)
	}
}

func TestBackgroundJob(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, _ := e.connect(nil, nil)
	var started mcpserver.TerminalResult
	ok(t, cs, "terminal", map[string]any{"command": "echo begin; sleep 0.5; echo end", "background": true}, &started)
	if started.JobID == "" || started.ExitCode != nil {
		t.Fatalf("background start = %+v; want a job id and no exit code", started)
	}
	var p mcpserver.ProcessResult
	ok(t, cs, "process", map[string]any{"action": "list"}, &p)
	if len(p.Jobs) != 1 || p.Jobs[0].ID != started.JobID {
		t.Errorf("list = %+v; want the job", p.Jobs)
	}
	ok(t, cs, "process", map[string]any{"action": "wait", "id": started.JobID}, &p)
	if p.Job == nil || p.Job.Running || p.Job.ExitCode == nil || *p.Job.ExitCode != 0 {
		t.Fatalf("wait = %+v; want ended with 0", p)
	}
	var polled mcpserver.ProcessResult
	ok(t, cs, "process", map[string]any{"action": "poll", "id": started.JobID}, &polled)
	if all := p.Stdout + polled.Stdout; !strings.Contains(all, "begin") || !strings.Contains(all, "end") {
		t.Errorf("job output = %q; want begin and end", all)
	}

	ok(t, cs, "terminal", map[string]any{"command": "sleep 60", "background": true}, &started)
	ok(t, cs, "process", map[string]any{"action": "kill", "id": started.JobID}, &p)
	ok(t, cs, "process", map[string]any{"action": "wait", "id": started.JobID}, &p)
	if p.Job.Running {
		t.Errorf("killed job still running: %+v", p.Job)
	}
	if msg := refused(t, cs, "process", map[string]any{"action": "poll"}); !strings.Contains(msg, "job id") {
		t.Errorf("poll without id: %s", msg)
	}
	if msg := refused(t, cs, "process", map[string]any{"action": "poll", "id": "nope"}); !strings.Contains(msg, "nope") {
		t.Errorf("poll unknown job: %s", msg)
	}
}

func TestHardlineRefused(t *testing.T) {
	e := newEnv(t, envOptions{configure: func(c *config.Config) { c.Approvals.Mode = config.ApprovalOff }})
	ap := &approver{action: "accept", decision: "once"}
	cs, wait := e.connect(&mcp.ClientOptions{ElicitationHandler: ap.handle}, nil)
	msg := refused(t, cs, "terminal", map[string]any{"command": "rm -rf /"})
	if !strings.Contains(msg, "hardline") {
		t.Errorf("refusal = %q; want it to say hardline", msg)
	}
	if ap.count() != 0 {
		t.Errorf("a hardline command was put to the person %d times; want never", ap.count())
	}
	wait()
	rs := e.records()
	if len(rs) != 1 || rs[0].Verdict != "hardline" || rs[0].Decision != audit.DecisionRefused || rs[0].Command != "rm -rf /" {
		t.Errorf("audit = %+v; want one refused hardline record", rs)
	}
}

func TestApprovalThroughElicitation(t *testing.T) {
	e := newEnv(t, envOptions{})
	ap := &approver{action: "accept", decision: "once"}
	cs, _ := e.connect(&mcp.ClientOptions{ElicitationHandler: ap.handle}, nil)
	ok(t, cs, "terminal", map[string]any{"command": "mkdir -p d"}, nil)
	if ap.count() != 0 {
		t.Fatalf("a safe command asked for approval")
	}

	var out mcpserver.TerminalResult
	ok(t, cs, "terminal", map[string]any{"command": dangerous}, &out)
	if ap.count() != 1 {
		t.Fatalf("asked %d times; want 1", ap.count())
	}
	q := ap.first()
	if !strings.Contains(q.Message, dangerous) || !strings.Contains(q.Message, "chmod") {
		t.Errorf("approval message = %q; want the command and its findings", q.Message)
	}
	schema, _ := q.RequestedSchema.(map[string]any)
	if props, _ := schema["properties"].(map[string]any); props["decision"] == nil {
		t.Errorf("requested schema = %v; want a decision field", q.RequestedSchema)
	}

	for _, tc := range []struct{ action, decision, want string }{
		{"decline", "", "denied"},
		{"cancel", "", "denied"},
		{"accept", "deny", "denied"},
	} {
		ap.set(tc.action, tc.decision)
		msg := refused(t, cs, "terminal", map[string]any{"command": dangerous})
		if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "command_allowlist") {
			t.Errorf("%s/%s: refusal = %q; want %q and the operator hint", tc.action, tc.decision, msg, tc.want)
		}
	}

	// "session" covers the same findings for the rest of the session without asking again.
	ap.set("accept", "session")
	ok(t, cs, "terminal", map[string]any{"command": dangerous}, nil)
	n := ap.count()
	ok(t, cs, "terminal", map[string]any{"command": dangerous}, nil)
	if ap.count() != n {
		t.Errorf("asked again after a session approval")
	}

	decisions := map[string]int{}
	for _, r := range e.records() {
		decisions[r.Decision]++
	}
	if decisions[audit.DecisionApprovedOnce] != 1 || decisions[audit.DecisionDenied] != 3 || decisions[audit.DecisionApprovedSession] != 1 {
		t.Errorf("audit decisions = %v; want 1 approved_once, 3 denied, 1 approved_session", decisions)
	}
}

func TestNoElicitationRefuses(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, _ := e.connect(nil, nil)
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	if info.Elicitation {
		t.Error("elicitation = true for a client without the capability")
	}
	msg := refused(t, cs, "terminal", map[string]any{"command": dangerous})
	for _, want := range []string{"elicitation", "command_allowlist"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal = %q; want it to mention %q", msg, want)
		}
	}
}

func TestToolSwitches(t *testing.T) {
	e := newEnv(t, envOptions{configure: func(c *config.Config) {
		c.Tools.ShellExecute = false
		c.Tools.FileWrite = false
	}})
	cs, _ := e.connect(nil, nil)
	if got, want := toolNames(t, cs), []string{"read_file", "sandbox_info"}; !slices.Equal(got, want) {
		t.Errorf("tools = %v; want %v", got, want)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		sw   string
	}{
		{"terminal", map[string]any{"command": "echo hi"}, "shell_execute"},
		{"process", map[string]any{"action": "list"}, "shell_execute"},
		{"write_file", map[string]any{"path": "x", "content": "y"}, "file_write"},
	} {
		msg := refused(t, cs, c.tool, c.args)
		if !strings.Contains(msg, "switched off") || !strings.Contains(msg, "tools."+c.sw) {
			t.Errorf("%s: refusal = %q; want switched off and tools.%s", c.tool, msg, c.sw)
		}
	}
	if _, err := os.Stat(filepath.Join(e.work, "x")); err == nil {
		t.Error("write_file wrote although file_write is off")
	}
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	if !slices.Equal(info.Tools, []string{"read_file", "sandbox_info"}) {
		t.Errorf("sandbox_info tools = %v", info.Tools)
	}
}

// Without the gate the server still refuses switched-off tools itself.
func TestToolSwitchesUngated(t *testing.T) {
	e := newEnv(t, envOptions{ungated: true, configure: func(c *config.Config) { c.Tools.FileSystem = false }})
	cs, _ := e.connect(nil, nil)
	if got, want := toolNames(t, cs), []string{"process", "sandbox_info", "session", "terminal"}; !slices.Equal(got, want) {
		t.Errorf("tools = %v; want %v", got, want)
	}
	if msg := refused(t, cs, "read_file", map[string]any{"path": "x"}); !strings.Contains(msg, "tools.file_system") {
		t.Errorf("read_file: %s", msg)
	}
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	if info.PolicyGate {
		t.Error("policy_gate = true for an ungated backend")
	}
}

func TestCallLimit(t *testing.T) {
	e := newEnv(t, envOptions{configure: func(c *config.Config) { c.Loop.MaxToolCalls = 2 }})
	cs, _ := e.connect(nil, nil)
	var out mcpserver.TerminalResult
	ok(t, cs, "terminal", map[string]any{"command": "true"}, &out)
	if out.RemainingToolCalls == nil || *out.RemainingToolCalls != 1 {
		t.Errorf("remaining_tool_calls = %v; want 1", out.RemainingToolCalls)
	}
	ok(t, cs, "write_file", map[string]any{"path": "f", "content": "x"}, nil)
	msg := refused(t, cs, "terminal", map[string]any{"command": "true"})
	if !strings.Contains(msg, "max_tool_calls") {
		t.Errorf("refusal = %q; want it to name loop.max_tool_calls", msg)
	}
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	if info.RemainingToolCalls != 0 || info.MaxToolCalls != 2 || !info.PolicyGate {
		t.Errorf("sandbox_info = %+v; want 0 of 2 left", info)
	}
	// Another MCP session has its own budget.
	other, _ := e.connect(nil, nil)
	ok(t, other, "terminal", map[string]any{"command": "true"}, nil)
}

func TestSandboxInfo(t *testing.T) {
	e := newEnv(t, envOptions{})
	ap := &approver{action: "accept", decision: "once"}
	cs, _ := e.connect(&mcp.ClientOptions{ElicitationHandler: ap.handle}, nil)
	var info mcpserver.InfoResult
	res := ok(t, cs, "sandbox_info", nil, &info)
	if info.Backend != "local" || !info.PolicyGate || info.ApprovalMode != "manual" || !info.Elicitation ||
		info.RemainingToolCalls != -1 || !slices.Equal(info.Tools, allTools) || info.Capabilities.Isolation == "" {
		t.Errorf("sandbox_info = %+v", info)
	}
	if txt := text(res); !strings.Contains(txt, "backend: local") || !strings.Contains(txt, "unlimited") {
		t.Errorf("text = %q", txt)
	}
	if len(e.records()) != 0 {
		t.Error("sandbox_info was audited as a tool call")
	}
}

func TestProgressNotifications(t *testing.T) {
	e := newEnv(t, envOptions{})
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	cs, _ := e.connect(&mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, r.Params)
		mu.Unlock()
	}}, nil)
	params := &mcp.CallToolParams{Name: "terminal", Arguments: map[string]any{"command": "echo first; sleep 1.3; echo second; sleep 1.2"}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || res.IsError {
		t.Fatalf("CallTool: %v %v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("got %d progress notifications; want at least 2", len(got))
	}
	for i, p := range got {
		if p.ProgressToken != "tok-1" || (i > 0 && p.Progress <= got[i-1].Progress) {
			t.Errorf("notification %d = %+v; want token tok-1 and growing progress", i, p)
		}
	}
	if !strings.Contains(got[0].Message, "bytes of output: first") {
		t.Errorf("first message = %q; want the byte count and the latest line", got[0].Message)
	}
	// Without a token, none are sent.
	n := len(got)
	mu.Unlock()
	ok(t, cs, "terminal", map[string]any{"command": "sleep 1.2"}, nil)
	mu.Lock()
	if len(got) != n {
		t.Errorf("progress sent without a progress token")
	}
}

func TestCloseEndsSessions(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, _ := e.connect(nil, nil)
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	ok(t, cs, "terminal", map[string]any{"command": "sleep 30", "background": true}, nil)
	if !hasSession(t, e.inner, info.Session) {
		t.Fatalf("session %s missing while open", info.Session)
	}
	done := make(chan struct{})
	go func() {
		e.srv.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
	if hasSession(t, e.inner, info.Session) {
		t.Errorf("session %s survives Close", info.Session)
	}
}

// TestTerminalStateSaved: state_saved is true for an ordinary command and false, with a
// warning in the text, when the command's state could not be written (the wrapper's state
// path pointed at a missing directory, as a full disk refuses it).
func TestTerminalStateSaved(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, _ := e.connect(nil, nil)
	var out mcpserver.TerminalResult
	ok(t, cs, "terminal", map[string]any{"command": "export HS_S=1"}, &out)
	if out.StateSaved == nil || !*out.StateSaved {
		t.Errorf("terminal(export) state_saved = %v; want true", out.StateSaved)
	}
	res := ok(t, cs, "terminal", map[string]any{"command": "export HS_S=2; __hermes_st=/nonexistent-hermes-dir/state"}, &out)
	if out.StateSaved == nil || *out.StateSaved || !strings.Contains(text(res), "were not saved") {
		t.Errorf("terminal(unsaved) state_saved = %v, text %q; want false and a warning", out.StateSaved, text(res))
	}
	ok(t, cs, "terminal", map[string]any{"command": "echo $HS_S"}, &out)
	if out.Stdout != "1\n" {
		t.Errorf("after a failed save: %q; want the state from before it, 1", out.Stdout)
	}
}
