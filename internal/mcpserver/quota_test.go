package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
)

// quotaAnswer checks a refused tool call's HTTP answer: 429, a Retry-After of whole seconds
// within [1, maxRetry], and a JSON-RPC error for request id that names the limit.
func quotaAnswer(t *testing.T, what string, code int, hdr http.Header, body string, id int, limit string, maxRetry int) {
	t.Helper()
	retry, err := strconv.Atoi(hdr.Get("Retry-After"))
	if code != http.StatusTooManyRequests || err != nil || retry < 1 || retry > maxRetry {
		t.Errorf("%s: status %d, Retry-After %q; want 429 with 1..%d seconds (%s)", what, code, hdr.Get("Retry-After"), maxRetry, body)
	}
	var msg struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Limit      string `json:"limit"`
				RetryAfter int    `json:"retry_after_seconds"`
				Reset      string `json:"reset"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Errorf("%s: body %q is not a JSON-RPC error: %v", what, body, err)
		return
	}
	if msg.ID != id || msg.Error.Code != mcpserver.CodeQuota || msg.Error.Data.Limit != limit || msg.Error.Data.Reset == "" ||
		!strings.Contains(msg.Error.Message, limit) || msg.Error.Data.RetryAfter != retry {
		t.Errorf("%s: %+v; want id %d, code %d naming %s and its reset, retry_after_seconds = Retry-After", what, msg, id, mcpserver.CodeQuota, limit)
	}
}

// TestQuota429: over HTTP, a tool call over its key's max_concurrent or rate limit gets HTTP
// 429 with Retry-After and a JSON-RPC error naming the limit; the SDK client's session
// survives it and recovers. A client that hangs up while its call runs does not free its
// slot: the command still runs, so the next call is refused until it ends. Where no HTTP
// status can carry the refusal (a JSON-RPC batch), the MCP error does.
func TestQuota429(t *testing.T) {
	keys := filepath.Join(t.TempDir(), mcpserver.KeysFileName)
	carol, err := mcpserver.AddKey(keys, mcpserver.Key{Name: "carol", MaxConcurrent: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dave, err := mcpserver.AddKey(keys, mcpserver.Key{Name: "dave", RatePerMinute: 2}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{keysFile: keys})
	base, _ := teamServer(t, e)
	url := base + mcpserver.HTTPPath
	callBody := func(id int, command string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"terminal","arguments":{"command":%q}}}`, id, command)
	}

	// max_concurrent: carol's first call runs; her client hangs up on it.
	c, err := httpClient(t, url, carol, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok(t, c, "terminal", map[string]any{"command": "true"}, nil)
	started, finished := filepath.Join(e.work, "started"), filepath.Join(e.work, "finished")
	hctx, hangUp := context.WithCancel(t.Context())
	defer hangUp()
	req, _ := http.NewRequestWithContext(hctx, "POST", url,
		strings.NewReader(callBody(50, "touch "+started+"; sleep 2; touch "+finished)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Authorization", "Bearer "+carol)
	req.Header.Set("Mcp-Session-Id", c.ID())
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !exists(started) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !exists(started) {
		t.Fatal("carol's first command did not start")
	}
	hangUp()
	<-firstDone
	code, hdr, body := post(t, url, carol, c.ID(), callBody(51, "echo second"))
	if exists(finished) {
		t.Fatal("the first command ended before the second call was sent: the check proves nothing")
	}
	quotaAnswer(t, "carol's second call while her first (hung up on) runs", code, hdr, body, 51, "max_concurrent", 5)
	// The SDK client gets an error, and its session goes on.
	carolRefused := 1
	_, err = c.CallTool(t.Context(), &mcp.CallToolParams{Name: "terminal", Arguments: map[string]any{"command": "echo third"}})
	switch {
	case err != nil && strings.Contains(err.Error(), http.StatusText(http.StatusTooManyRequests)):
		carolRefused++
	case !exists(finished):
		t.Errorf("carol's SDK call while her first runs: %v; want a refusal (Too Many Requests)", err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for !exists(finished) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	var out mcpserver.TerminalResult
	for time.Now().Before(deadline) { // the slot frees once the call's answer is written
		res, err := c.CallTool(t.Context(), &mcp.CallToolParams{Name: "terminal", Arguments: map[string]any{"command": "echo recovered"}})
		if err == nil && !res.IsError {
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, &out)
			break
		}
		if err != nil && strings.Contains(err.Error(), http.StatusText(http.StatusTooManyRequests)) {
			carolRefused++ // the answer of the first call is still being written
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out.Stdout != "recovered\n" {
		t.Errorf("carol after her first command ended: %q; want recovered", out.Stdout)
	}

	// rate: dave may make 2 calls a minute.
	d, err := httpClient(t, url, dave, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok(t, d, "sandbox_info", nil, nil)
	ok(t, d, "sandbox_info", nil, nil)
	if _, err := d.CallTool(t.Context(), &mcp.CallToolParams{Name: "sandbox_info"}); err == nil ||
		!strings.Contains(err.Error(), http.StatusText(http.StatusTooManyRequests)) {
		t.Errorf("dave's 3rd call in a minute through the SDK: %v; want Too Many Requests", err)
	}
	code, hdr, body = post(t, url, dave, d.ID(), `{"jsonrpc":"2.0","id":60,"method":"tools/call","params":{"name":"sandbox_info"}}`)
	quotaAnswer(t, "dave's 4th call in a minute", code, hdr, body, 60, "rate", 30)

	// A batch (protocol 2025-03-26) has no one HTTP status per call: the MCP error says it.
	req, _ = http.NewRequestWithContext(t.Context(), "POST", url,
		strings.NewReader(`[{"jsonrpc":"2.0","id":61,"method":"tools/call","params":{"name":"sandbox_info"}}]`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	req.Header.Set("Authorization", "Bearer "+dave)
	req.Header.Set("Mcp-Session-Id", d.ID())
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Errorf("batch: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), strconv.Itoa(mcpserver.CodeQuota)) ||
			!strings.Contains(string(b), `"limit":"rate"`) || !strings.Contains(string(b), "retry_after_seconds") {
			t.Errorf("dave's call in a batch over his rate: %d %q; want 200 with the MCP error naming the rate", resp.StatusCode, b)
		}
	}

	m := metricsText(t, base)
	if got := metric(m, "hermes_sandbox_mcp_quota_rejections_total", `key="carol"`, `limit="max_concurrent"`); got != float64(carolRefused) {
		t.Errorf("carol's max_concurrent rejections = %v; want %d", got, carolRefused)
	}
	if got := metric(m, "hermes_sandbox_mcp_quota_rejections_total", `key="dave"`, `limit="rate"`); got != 3 {
		t.Errorf("dave's rate rejections = %v; want 3 (SDK, raw, batch)", got)
	}
}
