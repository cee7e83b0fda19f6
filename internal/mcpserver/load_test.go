package mcpserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/backends/docker"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/dockerimage"
	"github.com/hermes-sandbox/hermes-sandbox/policy"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestLoadDocker: 50 MCP clients with one key each make 100 terminal calls over loopback HTTP
// on docker, alternating rounds with a baseline of the same calls made directly on gated
// sandbox sessions, and reports the median per-call overhead of MCP (p50/p95), the server's
// memory, errors and leaked containers. It runs only with HERMES_SANDBOX_TEST_LOAD=1 (and
// docker, HERMES_SANDBOX_TEST_FULL=1).
func TestLoadDocker(t *testing.T) {
	if os.Getenv("HERMES_SANDBOX_TEST_LOAD") != "1" {
		t.Skip("the load test runs with HERMES_SANDBOX_TEST_LOAD=1 HERMES_SANDBOX_TEST_FULL=1")
	}
	clients, calls, rounds := envInt("HERMES_SANDBOX_TEST_LOAD_CLIENTS", 50), envInt("HERMES_SANDBOX_TEST_LOAD_CALLS", 100), 4
	if calls < rounds {
		rounds = calls
	}
	img := dockerimage.Busybox(t, "the MCP load test", testenv.DefaultRootfs)
	label := fmt.Sprintf("hermes-sandbox.mcpload=%d", os.Getpid())
	dir := t.TempDir()
	cfg := config.NewConfig()
	cfg.Docker.Image = img
	cfg.Approvals.Mode = config.ApprovalOff
	cfg.MCP.MaxSessions = 2 * clients
	inner, err := docker.NewWith(cfg.Docker, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(dir, "state"),
		Environ: []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "DOCKER_HOST=" + os.Getenv("DOCKER_HOST")}}),
		docker.Options{Labels: map[string]string{"hermes-sandbox.mcpload": fmt.Sprint(os.Getpid())}})
	if err != nil {
		t.Fatal(err)
	}
	log, err := audit.Open(filepath.Join(dir, "audit.log"), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	b := gate.Wrap(inner, gate.Options{Classifier: policy.New(policy.Options{WorkDir: dir, Home: dir}),
		Mode: cfg.Approvals.Mode, Tools: cfg.Tools, Audit: log})
	defer func() {
		b.Close()
		if left := testenv.RemoveContainers(testenv.Docker(t), label); len(left) > 0 {
			t.Errorf("leaked containers: %v", left)
		}
	}()
	keys := filepath.Join(dir, mcpserver.KeysFileName)
	var keyOf []string
	for i := range clients {
		k, err := mcpserver.AddKey(keys, mcpserver.Key{Name: fmt.Sprintf("agent%02d", i)}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keyOf = append(keyOf, k)
	}
	srv, err := mcpserver.New(mcpserver.Options{Backend: b, Config: cfg, KeysFile: keys})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: srv}
	base, stop := teamServer(t, e)

	// Baseline sessions (the same gate, no MCP) and MCP clients, all opened before timing.
	ctx := context.Background()
	direct := make([]sandbox.Session, clients)
	mcps := make([]*mcp.ClientSession, clients)
	var wg sync.WaitGroup
	var openErr atomic.Value
	for i := range clients {
		wg.Go(func() {
			s, err := b.Open(ctx, fmt.Sprintf("load-base-%02d", i))
			if err != nil {
				openErr.Store(err)
				return
			}
			direct[i] = s
			cs, err := httpClient(t, base+mcpserver.HTTPPath, keyOf[i], nil)
			if err != nil {
				openErr.Store(err)
				return
			}
			mcps[i] = cs
			if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "terminal", Arguments: map[string]any{"command": "true"}}); err != nil || r.IsError {
				openErr.Store(fmt.Errorf("warm-up: %v %v", err, r))
			}
		})
	}
	wg.Wait()
	if err, _ := openErr.Load().(error); err != nil {
		t.Fatal(err)
	}

	var errs atomic.Int64
	run := func(viaMCP bool, n int) []time.Duration {
		var mu sync.Mutex
		var ds []time.Duration
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				local := make([]time.Duration, 0, n)
				for range n {
					t0 := time.Now()
					if viaMCP {
						r, err := mcps[i].CallTool(ctx, &mcp.CallToolParams{Name: "terminal", Arguments: map[string]any{"command": "true"}})
						if err != nil || r.IsError {
							errs.Add(1)
						}
					} else if res, err := direct[i].Exec(ctx, sandbox.Command{Script: "true"}); err != nil || res.ExitCode != 0 {
						errs.Add(1)
					}
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				ds = append(ds, local...)
				mu.Unlock()
			})
		}
		wg.Wait()
		return ds
	}
	var baseP50, baseP95, mcpP50, mcpP95 []time.Duration
	start := time.Now()
	for range rounds { // A/B alternated, calls/rounds per client each
		ds := run(false, calls/rounds)
		baseP50, baseP95 = append(baseP50, testenv.Percentile(ds, 50)), append(baseP95, testenv.Percentile(ds, 95))
		ds = run(true, calls/rounds)
		mcpP50, mcpP95 = append(mcpP50, testenv.Percentile(ds, 50)), append(mcpP95, testenv.Percentile(ds, 95))
	}
	elapsed := time.Since(start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	med := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	t.Logf("%d clients x %d terminal calls over MCP (and as many direct), %d A/B rounds, %v", clients, calls, rounds, elapsed.Round(time.Millisecond))
	t.Logf("direct (gated session.Exec): p50 %v p95 %v (medians of rounds)", med(baseP50), med(baseP95))
	t.Logf("MCP over loopback HTTP:      p50 %v p95 %v", med(mcpP50), med(mcpP95))
	t.Logf("per-call MCP overhead:       p50 %v p95 %v", med(mcpP50)-med(baseP50), med(mcpP95)-med(baseP95))
	t.Logf("process memory (server and clients in one process): heap in use %d MiB, from the OS %d MiB, goroutines %d",
		ms.HeapInuse>>20, ms.Sys>>20, runtime.NumGoroutine())
	t.Logf("errors: %d", errs.Load())
	if errs.Load() != 0 {
		t.Errorf("%d calls failed", errs.Load())
	}
	for _, cs := range mcps {
		cs.Close()
	}
	for _, s := range direct {
		s.Close()
		if m, ok := b.(sandbox.SessionManager); ok {
			m.Remove(ctx, s.Name())
		}
	}
	if err := stop(); err != nil {
		t.Errorf("ListenAndServe: %v", err)
	}
	cli := testenv.Docker(t)
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", label)})
	if err == nil {
		var names []string
		for _, c := range list.Items {
			names = append(names, strings.Join(c.Names, ","))
		}
		t.Logf("containers left after the server stopped: %d %v", len(names), names)
		if len(names) > 0 {
			t.Errorf("leaked containers: %v", names)
		}
	}
}

// envInt reads a positive integer from the environment, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
