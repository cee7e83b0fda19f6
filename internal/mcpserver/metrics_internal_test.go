package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// stubPool answers PoolStats as told, and notes whether the scrape bounded its wait.
type stubPool struct {
	st          sandbox.PoolStats
	err         error
	hadDeadline bool
}

func (p *stubPool) PoolStats(ctx context.Context) (sandbox.PoolStats, error) {
	_, p.hadDeadline = ctx.Deadline()
	return p.st, p.err
}

// scrape serves one /metrics request and returns its status and body.
func scrape(t *testing.T, m *metrics) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	m.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Code, rec.Body.String()
}

// TestPoolMetricsWhenTheBackendCannotSay: a backend whose pool lives in a cluster may fail to
// answer at a scrape. The pool's size is still reported, the ready gauge is left out (not a
// made-up 0), and every other metric is still served; an answer that comes is reported as is.
// The scrape gives the backend a deadline, so a cluster that hangs cannot hang /metrics.
func TestPoolMetricsWhenTheBackendCannotSay(t *testing.T) {
	failing := &stubPool{st: sandbox.PoolStats{Size: 3}, err: errors.New("the cluster does not answer")}
	m := newMetrics()
	m.reg.MustRegister(newPoolCollector("kubernetes", failing))
	m.quota("k1", "rate") // some other metric, to show it is still served
	code, body := scrape(t, m)
	if code != http.StatusOK {
		t.Fatalf("status %d; want 200 with the metrics that could be read: %s", code, body)
	}
	if !strings.Contains(body, `hermes_sandbox_mcp_pool_size{backend="kubernetes"} 3`) {
		t.Errorf("the pool's size is missing:\n%s", body)
	}
	if strings.Contains(body, "hermes_sandbox_mcp_pool_ready{") {
		t.Errorf("a ready count is reported although the backend could not say:\n%s", body)
	}
	if !strings.Contains(body, `hermes_sandbox_mcp_quota_rejections_total{key="k1",limit="rate"} 1`) {
		t.Errorf("the other metrics are not served:\n%s", body)
	}
	if !failing.hadDeadline {
		t.Error("PoolStats was asked without a deadline")
	}

	m = newMetrics()
	m.reg.MustRegister(newPoolCollector("kubernetes", &stubPool{st: sandbox.PoolStats{Size: 3, Ready: 2}}))
	if _, body := scrape(t, m); !strings.Contains(body, `hermes_sandbox_mcp_pool_ready{backend="kubernetes"} 2`) {
		t.Errorf("the ready count is missing:\n%s", body)
	}
}
