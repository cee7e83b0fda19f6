package mcpserver_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// TestE2EAuditDiskFullIsError runs the real server with its audit log on a full 64 KiB tmpfs:
// a call whose intent cannot be recorded comes back as isError naming the log and the cause,
// and the command did not run.
func TestE2EAuditDiskFullIsError(t *testing.T) {
	e := newE2E(t, 0)
	mnt := testenv.Tmpfs(t, "64k")
	log := filepath.Join(mnt, "audit.log")
	if _, err := audit.Init(log, audit.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.FillFS(t, mnt)
	cmd := e.command()
	cmd.Env = append(cmd.Env, "HERMES_SANDBOX_AUDIT_LOG_DESTINATION="+log)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).
		Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect over stdio: %v\nstderr: %s", err, stderr.String())
	}
	defer cs.Close()
	for i := 0; ; i++ {
		if i > 50 {
			t.Fatal("50 calls ran on a full disk; want isError once the log's last block is full")
		}
		mark := filepath.Join(e.work, fmt.Sprint(i))
		res := call(t, cs, "terminal", map[string]any{"command": "touch " + mark})
		_, statErr := os.Stat(mark)
		if !res.IsError {
			if statErr != nil {
				t.Fatalf("call %d succeeded but did not run: %v", i, statErr)
			}
			continue
		}
		msg := text(res)
		if statErr == nil {
			t.Fatalf("call %d ran although its intent could not be recorded: %s", i, msg)
		}
		for _, want := range []string{log, "disk full", "did not run"} {
			if !strings.Contains(msg, want) {
				t.Errorf("isError message %q does not say %q", msg, want)
			}
		}
		break
	}
}
