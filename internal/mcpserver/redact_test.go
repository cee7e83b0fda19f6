package mcpserver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
)

const testSecret = "s3cr3t-value-8842"

// TestSecretsRedactedWhereverOutputLeaves checks every way output reaches the client besides
// a command's result: progress notifications, background-job polls and read_file.
func TestSecretsRedactedWhereverOutputLeaves(t *testing.T) {
	e := newEnv(t, envOptions{secrets: []string{testSecret}})
	var mu sync.Mutex
	var msgs []string
	cs, _ := e.connect(&mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		msgs = append(msgs, r.Params.Message)
		mu.Unlock()
	}}, nil)

	params := &mcp.CallToolParams{Name: "terminal", Arguments: map[string]any{"command": "echo token=" + testSecret + "; sleep 1.3; echo token=" + testSecret + "; sleep 1.2"}}
	params.SetProgressToken("tok-redact")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || res.IsError {
		t.Fatalf("CallTool: %v %v", err, res)
	}
	mu.Lock()
	if len(msgs) == 0 {
		t.Fatal("no progress notifications")
	}
	for _, m := range msgs {
		if strings.Contains(m, testSecret) || strings.Contains(m, testSecret[:10]) {
			t.Errorf("progress message leaks the secret: %q", m)
		}
	}
	if !strings.Contains(strings.Join(msgs, "\n"), "token=") {
		t.Errorf("progress messages %q; want the (redacted) line", msgs)
	}
	mu.Unlock()

	if err := os.WriteFile(filepath.Join(e.work, "creds.txt"), []byte("key "+testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := text(call(t, cs, "read_file", map[string]any{"path": "creds.txt"})); strings.Contains(got, testSecret) || !strings.Contains(got, "key ") {
		t.Errorf("read_file = %q; want the content with the secret redacted", got)
	}

	var job struct {
		JobID string `json:"job_id"`
	}
	ok(t, cs, "terminal", map[string]any{"command": "echo job " + testSecret, "background": true}, &job)
	deadline := time.Now().Add(20 * time.Second)
	seen := ""
	for time.Now().Before(deadline) && !strings.Contains(seen, "job ") {
		seen += text(call(t, cs, "process", map[string]any{"action": "poll", "id": job.JobID}))
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(seen, testSecret) || !strings.Contains(seen, "job ") {
		t.Errorf("job poll output = %q; want the line with the secret redacted", seen)
	}
}

// TestAuditRecordsCarryTheCaller checks that MCP calls are recorded with the client's name
// and the transport, and with the classifier's verdict even when refused before it counts.
func TestAuditRecordsCarryTheCaller(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, _ := e.connect(nil, nil)
	ok(t, cs, "terminal", map[string]any{"command": "echo hi"}, nil)
	call(t, cs, "terminal", map[string]any{"command": "rm -rf /"})
	rs, err := audit.ReadAll(e.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	var found int
	for _, r := range rs {
		if r.Tool != audit.ToolExec || r.Type != audit.TypeIntent {
			continue // a result record points at its intent, which says who asked
		}
		found++
		if r.Client != "test-client" || r.Transport != "in-memory" {
			t.Errorf("record %d: client %q transport %q; want test-client over in-memory", r.Seq, r.Client, r.Transport)
		}
		if strings.Contains(r.Command, "rm -rf") && r.Verdict != "hardline" {
			t.Errorf("refused record verdict = %q; want hardline", r.Verdict)
		}
	}
	if found != 2 {
		t.Errorf("found %d exec records; want 2", found)
	}
}
