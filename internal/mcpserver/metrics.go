package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// metrics are the server's Prometheus metrics. Labels name keys, never sessions: a session
// id per label would grow the series without bound.
type metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	denials  *prometheus.CounterVec
	quotas   *prometheus.CounterVec
	sessions *prometheus.GaugeVec
	egress   *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_sandbox_mcp_tool_calls_total",
			Help: "MCP tool calls by key, tool, backend, verdict (allowed, refused, error) and exit class (0, nonzero, timeout, none).",
		}, []string{"key", "tool", "backend", "verdict", "exit_class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hermes_sandbox_mcp_tool_call_duration_seconds",
			Help:    "Duration of MCP tool calls, from the request reaching the server to its answer.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"key", "tool", "backend"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_sandbox_mcp_gate_denials_total",
			Help: "Tool calls the policy gate refused, by key and reason (hardline, denied, no-approver, …).",
		}, []string{"key", "reason"}),
		quotas: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_sandbox_mcp_quota_rejections_total",
			Help: "Requests refused because their key was at a limit (max_sessions, max_concurrent, rate).",
		}, []string{"key", "limit"}),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hermes_sandbox_mcp_active_sessions",
			Help: "MCP sessions holding a sandbox session, by key.",
		}, []string{"key"}),
		egress: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_sandbox_mcp_egress_connections_total",
			Help: "Outbound connections from sandboxes that the egress proxy allowed or denied, by key, backend and decision.",
		}, []string{"key", "backend", "decision"}),
	}
	m.reg.MustRegister(m.calls, m.duration, m.denials, m.quotas, m.sessions, m.egress,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// poolCollector reads the backend's warm pool at each scrape.
type poolCollector struct {
	backend     string
	pool        sandbox.PoolReporter
	size, ready *prometheus.Desc
}

func newPoolCollector(backend string, pool sandbox.PoolReporter) poolCollector {
	return poolCollector{backend: backend, pool: pool,
		size: prometheus.NewDesc("hermes_sandbox_mcp_pool_size",
			"Ready sandboxes the backend's warm pool keeps (docker.pool_size, kubernetes.pool_size); 0: no pool.", []string{"backend"}, nil),
		ready: prometheus.NewDesc("hermes_sandbox_mcp_pool_ready",
			"Sandboxes in the backend's warm pool ready to be handed out now.", []string{"backend"}, nil)}
}

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.size; ch <- c.ready }

// poolScrapeTimeout bounds the backend's answer at a scrape (kubernetes asks its cluster).
const poolScrapeTimeout = 5 * time.Second

// Collect reports the pool's size and ready count; when the backend cannot say (its cluster
// does not answer), the ready gauge is an error the scrape reports, and the other metrics are
// still served (promhttp.ContinueOnError).
func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), poolScrapeTimeout)
	defer cancel()
	st, err := c.pool.PoolStats(ctx)
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(st.Size), c.backend)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.ready, fmt.Errorf("%s warm pool: %w", c.backend, err))
		return
	}
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, float64(st.Ready), c.backend)
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func (m *metrics) quota(key, limit string) { m.quotas.WithLabelValues(key, limit).Inc() }

// observe records one finished tool call.
func (m *metrics) observe(key, tool, backend string, d time.Duration, res mcp.Result, err error) {
	verdict, exit := "allowed", "none"
	if cr, ok := res.(*mcp.CallToolResult); ok && cr != nil {
		var re *gate.RefusedError
		switch {
		case errors.As(cr.GetError(), &re):
			verdict = "refused"
			m.denials.WithLabelValues(key, re.Reason).Inc()
		case cr.IsError:
			verdict = "error"
		default:
			exit = exitClass(cr)
		}
	} else if err != nil {
		verdict = "error"
	}
	m.calls.WithLabelValues(key, tool, backend, verdict, exit).Inc()
	m.duration.WithLabelValues(key, tool, backend).Observe(d.Seconds())
}

// exitClass reads a terminal result's exit code: 0, nonzero, timeout, or none (no command ran
// to an end: another tool, or a background job).
func exitClass(cr *mcp.CallToolResult) string {
	var out struct {
		ExitCode *int `json:"exit_code"`
		TimedOut bool `json:"timed_out"`
	}
	var data []byte
	switch v := cr.StructuredContent.(type) {
	case json.RawMessage:
		data = v
	case nil:
		return "none"
	default:
		data, _ = json.Marshal(v)
	}
	if json.Unmarshal(data, &out) != nil || out.ExitCode == nil {
		return "none"
	}
	switch {
	case out.TimedOut:
		return "timeout"
	case *out.ExitCode == 0:
		return "0"
	}
	return "nonzero"
}
