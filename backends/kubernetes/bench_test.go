package kubernetes

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// These run against the real kube-apiserver of internal/testenv/kubeapi and the fake node of
// kubetest, whose exec endpoint is a docker exec into the pod's container: the baseline is
// bound by docker exec here, not by a kubelet and the cluster network. Pod creation is slow,
// so run FirstResult with few iterations:
//
//	go test ./backends/kubernetes/ -run '^$' -bench 'WarmChannel|PodExec' -benchtime 200x
//	go test ./backends/kubernetes/ -run '^$' -bench FirstResult -benchtime 5x

// benchSession opens name on be and runs a first `true` (pod start and helper upload), untimed.
func benchSession(b *testing.B, be *Backend, name string) *session {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess, err := be.Open(ctx, name)
	if err != nil {
		b.Fatalf("Open(%q) = %v", name, err)
	}
	b.Cleanup(func() { sess.Close() })
	testenv.ExecTrue(b, sess)
	if b.Failed() {
		b.FailNow()
	}
	return sess.(*session)
}

// BenchmarkWarmChannel is the per-command latency of `true` in a warm session: one request
// over the helper's long-lived exec and its streamed reply.
func BenchmarkWarmChannel(b *testing.B) {
	c := newCluster(b)
	be := c.backend(b, "", nil)
	testenv.BenchWarm(b, benchSession(b, be, "bench-warm"), 20)
}

// BenchmarkPodExec is the baseline: one pod exec of /bin/true per command, through the
// backend's own executor (client-go's WebSocket executor, SPDY as fallback) against the same
// endpoint and the same kind of pod.
func BenchmarkPodExec(b *testing.B) {
	c := newCluster(b)
	be := c.backend(b, "", nil)
	sess := benchSession(b, be, "bench-podexec")
	conn, err := be.cluster()
	if err != nil {
		b.Fatal(err)
	}
	sess.mu.Lock()
	pod := sess.pod
	sess.mu.Unlock()
	podExec := func() time.Duration {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ex, err := be.executor(conn, pod, []string{"/bin/true"}, false)
		if err != nil {
			b.Fatalf("executor(%s) = %v", pod, err)
		}
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard}); err != nil {
			b.Fatalf("pod exec /bin/true in %s = %v", pod, err)
		}
		return time.Since(start)
	}
	for range 5 {
		podExec()
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		ds = append(ds, podExec())
	}
	b.StopTimer()
	b.Logf("pod exec over %s", map[bool]string{false: "WebSocket", true: "SPDY"}[be.spdyOnly.Load()])
	testenv.ReportLatency(b, ds)
}

// benchRun numbers FirstResult's runs, so that every iteration of every run (the testing
// package calls a benchmark once with b.N = 1 before the real run) has a fresh session name.
var benchRun atomic.Int64

// BenchmarkFirstResult is a new session's first `true`: Open, then pod create → scheduled →
// running → helper upload → result; with pool=2 the pod comes from the warm pool, whose pods
// are Running before each timed iteration. Each session is removed, untimed, afterwards.
func BenchmarkFirstResult(b *testing.B) {
	for _, pool := range []int{0, 2} {
		b.Run(fmt.Sprintf("pool=%d", pool), func(b *testing.B) {
			c := newCluster(b)
			be := c.backend(b, "", func(cfg *config.Config) { cfg.Kubernetes.PoolSize = pool })
			// The engine has seen the image and the helper; the scope's NetworkPolicy exists.
			warm := benchSession(b, be, fmt.Sprintf("bench-first-warmup-%d", benchRun.Add(1)))
			warm.Close()
			var prepare func()
			if pool > 0 {
				prepare = func() { waitPool(b, be, pool) }
			}
			testenv.BenchFirstResult(b, be, fmt.Sprintf("bench-first-%d", benchRun.Add(1)), prepare)
		})
	}
}

// waitPool fills the warm pool and waits, polling with a deadline, until n of its pods run.
func waitPool(b *testing.B, be *Backend, n int) {
	b.Helper()
	c, err := be.cluster()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be.refill(ctx, c)
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 250*time.Millisecond) {
		list, err := c.api.pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: be.poolSelector()})
		if err != nil {
			b.Fatalf("list the warm pool: %v", err)
		}
		running := 0
		for i := range list.Items {
			if p := &list.Items[i]; !ended(p) && p.Status.Phase == corev1.PodRunning && containerRunning(p) {
				running++
			}
		}
		if running >= n {
			return
		}
		if err := sandbox.Sleep(ctx, delay); err != nil {
			b.Fatalf("the warm pool has %d of %d pods running after 2 minutes", running, n)
		}
	}
}
