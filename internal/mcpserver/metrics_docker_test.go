package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/backends/docker"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/dockerimage"
	"github.com/hermes-sandbox/hermes-sandbox/policy"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// dockerTestLabel marks the containers and volumes of this package's docker tests.
const dockerTestLabel = "hermes-sandbox.mcptest"

// poolContainers counts the warm-pool containers carrying label (key=value).
func poolContainers(t *testing.T, cli *client.Client, label string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", label)})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	n := 0
	for _, c := range list.Items {
		if len(c.Names) > 0 && strings.HasPrefix(strings.TrimPrefix(c.Names[0], "/"), "hermes-pool-") && c.State == "running" {
			n++
		}
	}
	return n
}

// TestMetricsPoolAndEgress: on docker with a warm pool and an egress allowlist, /metrics
// reports the pool's size and its ready containers as the engine holds them, and counts, under
// the key whose session connected, the connections the proxy allowed and denied.
func TestMetricsPoolAndEgress(t *testing.T) {
	img := dockerimage.Busybox(t, "the MCP metrics test", testenv.DefaultRootfs)
	cli := testenv.Docker(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "index-ok\n") }))
	defer site.Close()
	port := site.Listener.Addr().(*net.TCPAddr).Port
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	res := egresstest.Resolver{Names: map[string][]netip.Addr{"allowed.test": lo, "denied.test": lo}}

	dir := t.TempDir()
	cfg := config.NewConfig()
	cfg.Docker.Image = img
	cfg.Docker.Network = config.NetworkAllowlist
	cfg.Docker.EgressAllow = []string{fmt.Sprintf("allowed.test:%d", port)}
	cfg.Docker.PoolSize = 1
	cfg.Approvals.Mode = config.ApprovalOff
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	value := fmt.Sprintf("%d-%s", os.Getpid(), t.Name())
	inner, err := docker.NewWith(cfg.Docker, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(dir, "state"),
		Environ: []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "DOCKER_HOST=" + os.Getenv("DOCKER_HOST")}}),
		docker.Options{Labels: map[string]string{dockerTestLabel: value}, EgressResolver: res, EgressAllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	b := gate.Wrap(inner, gate.Options{Classifier: policy.New(policy.Options{WorkDir: dir, Home: dir}),
		Mode: cfg.Approvals.Mode, Tools: cfg.Tools})
	t.Cleanup(func() {
		b.Close()
		if left := testenv.RemoveLabelled(dockerTestLabel, value); left != "" {
			t.Errorf("left behind: %s", left)
		}
	})
	keys := filepath.Join(dir, mcpserver.KeysFileName)
	alice, err := mcpserver.AddKey(keys, mcpserver.Key{Name: "alice"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Options{Backend: b, Config: cfg, KeysFile: keys})
	if err != nil {
		t.Fatal(err)
	}
	inner.ObserveEgress(srv.CountEgress) // as the CLI does, beside the audit log's observer
	base, stop := teamServer(t, &env{t: t, srv: srv})
	cs, err := httpClient(t, base+mcpserver.HTTPPath, alice, nil)
	if err != nil {
		t.Fatal(err)
	}

	var out mcpserver.TerminalResult
	for range 2 {
		ok(t, cs, "terminal", map[string]any{"command": fmt.Sprintf("wget -q -O - http://allowed.test:%d/", port)}, &out)
		if out.ExitCode == nil || *out.ExitCode != 0 || out.Stdout != "index-ok\n" {
			t.Fatalf("wget allowed.test: exit %v %q %q; want index-ok", out.ExitCode, out.Stdout, out.Stderr)
		}
	}
	ok(t, cs, "terminal", map[string]any{"command": fmt.Sprintf("wget -q -O - http://denied.test:%d/", port)}, &out)
	if out.ExitCode == nil || *out.ExitCode == 0 || strings.Contains(out.Stdout, "index-ok") {
		t.Fatalf("wget denied.test: exit %v %q; want a refusal", out.ExitCode, out.Stdout)
	}

	var m string
	allowed := func() float64 {
		return metric(m, "hermes_sandbox_mcp_egress_connections_total", `key="alice"`, `backend="docker"`, `decision="allowed"`)
	}
	denied := func() float64 {
		return metric(m, "hermes_sandbox_mcp_egress_connections_total", `key="alice"`, `backend="docker"`, `decision="denied"`)
	}
	deadline := time.Now().Add(15 * time.Second)
	for m = metricsText(t, base); (allowed() != 2 || denied() != 1) && time.Now().Before(deadline); m = metricsText(t, base) {
		time.Sleep(50 * time.Millisecond)
	}
	if allowed() != 2 || denied() != 1 {
		t.Errorf("egress metrics: allowed %v, denied %v; want 2 and 1\n%s", allowed(), denied(), m)
	}

	// The pool refills to its size after the session's container was made; the metric and
	// the engine agree.
	ready := func() float64 { return metric(m, "hermes_sandbox_mcp_pool_ready", `backend="docker"`) }
	engine := 0
	deadline = time.Now().Add(2 * time.Minute)
	for {
		m = metricsText(t, base)
		engine = poolContainers(t, cli, dockerTestLabel+"="+value)
		if (ready() == 1 && engine == 1) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if size := metric(m, "hermes_sandbox_mcp_pool_size", `backend="docker"`); size != 1 || ready() != 1 || engine != 1 {
		t.Errorf("pool: metric size %v ready %v, engine %d ready containers; want 1, 1, 1", size, ready(), engine)
	}
	cs.Close()
	if err := stop(); err != nil {
		t.Errorf("ListenAndServe: %v", err)
	}
}
