// Package kubetest is the missing node of the test apiserver (internal/testenv/kubeapi): a fake
// scheduler and kubelet that run each pod's first container as a real Docker container (through
// the Engine API), a minimal agent-sandbox controller, and an HTTPS endpoint that proxies every
// request to the apiserver except pod exec, which it serves itself with the kubelet's own
// streaming code (k8s.io/cri-streaming), so client-go's SPDY and fallback executors, the real
// apiserver's authentication and RBAC, and real processes in real containers are all in the path.
//
// What it emulates and how faithfully is said where it is done: scheduling (kubelet.go),
// the pod → container translation (spec.go), exec and its authorization (exec.go, proxy.go), the
// Sandbox controller (sandbox.go) and the SandboxWarmPool and SandboxClaim one (warmpool.go).
package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/kubeapi"
)

// Options configure StartNode.
type Options struct {
	Nodes int    // fake Node objects to create and spread pods over (default 2)
	Label string // docker label key put on every container (the test package's leak-check label)
	Value string // its value
}

// Node is a running fake node: its endpoint, its Node objects, and the loops that schedule and
// run pods. StartNode stops it when the test ends.
type Node struct {
	URL    string // https://127.0.0.1:PORT: the endpoint clients use (Kubeconfig points at it)
	CAData []byte // PEM of the endpoint's certificate

	api      *kubeapi.Server
	docker   *client.Client
	opts     Options
	instance string   // docker label value naming this node's containers
	names    []string // its Node objects
	log      *slog.Logger

	srv      *httptest.Server
	upstream *http.Client // to the apiserver, for the caller's own requests (authentication)
	execs    atomic.Int64
	handlers sync.WaitGroup // exec handlers, which outlive the server's tracking once hijacked

	stop    context.CancelFunc
	wg      sync.WaitGroup // every goroutine of the node
	factory informers.SharedInformerFactory
	pods    corelisters.PodLister
	queue   workqueue.TypedRateLimitingInterface[string] // pod keys ns/name
	sandbox *sandboxController
	ext     *extController // SandboxTemplate, SandboxWarmPool, SandboxClaim

	mu    sync.Mutex
	byUID map[types.UID]*podState // guarded by mu
	next  int                     // guarded by mu; round-robin position of the scheduler
}

// Label keys put on every container besides Options.Label.
const (
	labelInstance  = "hermes-sandbox.kubetest/node"
	labelNamespace = "io.kubernetes.pod.namespace"
	labelPod       = "io.kubernetes.pod.name"
	labelUID       = "io.kubernetes.pod.uid"
	labelContainer = "io.kubernetes.container.name"
	nodePrefix     = "hermes-fake-node-"
	workers        = 4
)

// registry maps each live fake Node object's name to the node running it, so that any node's
// endpoint serves exec into pods another node (of a parallel test) runs, and nodes of one
// process never share a name.
var registry struct {
	sync.Mutex
	nodes map[string]*Node // guarded by the embedded Mutex
}

// StartNode creates opts.Nodes fake Node objects in api, starts the scheduler and kubelet loops
// and the agent-sandbox controllers, and serves the endpoint. At cleanup it stops them all, removes
// every container it made and deletes its Node objects. It skips the test without a Docker engine.
func StartNode(t testing.TB, api *kubeapi.Server, opts Options) *Node {
	t.Helper()
	if opts.Nodes <= 0 {
		opts.Nodes = 2
	}
	if opts.Label == "" {
		t.Fatal("kubetest: Options.Label is required (the docker label the leak check looks for)")
	}
	docker := testenv.DockerEngine(t, "the fake node runs pods as containers and ")
	var id [6]byte
	rand.Read(id[:])
	n := &Node{
		api: api, docker: docker, opts: opts, instance: hex.EncodeToString(id[:]),
		log:   testenv.Logger(),
		byUID: map[types.UID]*podState{},
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	n.stop = stop
	t.Cleanup(n.shutdown)

	n.claimNames(opts.Nodes)
	if err := n.createNodes(ctx); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if err := n.serve(ctx); err != nil {
		t.Fatalf("kubetest: start the endpoint: %v", err)
	}

	n.queue = workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 5*time.Second))
	n.factory = informers.NewSharedInformerFactory(api.Client, 0)
	podInformer := n.factory.Core().V1().Pods()
	n.pods = podInformer.Lister()
	n.sandbox = newSandboxController(n)
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    n.podEvent,
		UpdateFunc: func(_, obj any) { n.podEvent(obj) },
		DeleteFunc: n.podEvent,
	}); err != nil {
		t.Fatalf("kubetest: watch pods: %v", err)
	}
	n.factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for typ, ok := range n.factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			t.Fatalf("kubetest: the %v cache did not sync within a minute", typ)
		}
	}
	for range workers {
		n.wg.Go(func() {
			for n.processNext(ctx) {
			}
		})
	}
	n.sandbox.start(ctx)
	n.ext = newExtController(n)
	n.ext.start(ctx)
	return n
}

// Kubeconfig writes a kubeconfig pointing at the node's endpoint with token, namespace as the
// context's namespace, and returns its path.
func (n *Node) Kubeconfig(t testing.TB, token, namespace string) string {
	t.Helper()
	return kubeapi.Kubeconfig(t, n.URL, n.CAData, token, namespace)
}

// ExecCount is how many pod exec requests the endpoint has served so far: authorized, and with
// their streams set up (a WebSocket attempt the fallback executor retries over SPDY is not one).
func (n *Node) ExecCount() int64 { return n.execs.Load() }

// KillPod makes the pod's container die as an OOM kill or an eviction would: it removes the
// container and the pod's status becomes Failed (reason Evicted, the container terminated with
// exit code 137, OOMKilled). It returns once the status is written.
func (n *Node) KillPod(ns, name string) error {
	owner, st := findPod(ns, name)
	if st == nil {
		return fmt.Errorf("kubetest: kill pod %s/%s: no container runs it on any fake node", ns, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	owner.mu.Lock()
	st.killed = true
	id := st.containerID
	owner.mu.Unlock()
	if id != "" {
		if _, err := owner.docker.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			return fmt.Errorf("kubetest: kill pod %s/%s: remove container %.12s: %w", ns, name, id, err)
		}
	}
	owner.queue.Add(ns + "/" + name)
	for {
		pod, err := n.api.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("kubetest: kill pod %s/%s: %w", ns, name, err)
		}
		if pod.UID == st.uid && pod.Status.Phase == corev1.PodFailed {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: kill pod %s/%s: its status is still %s after a minute", ns, name, pod.Status.Phase)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// findPod returns the node running the current container of pod ns/name, if any.
func findPod(ns, name string) (*Node, *podState) {
	registry.Lock()
	nodes := make([]*Node, 0, len(registry.nodes))
	seen := map[*Node]bool{}
	for _, n := range registry.nodes {
		if !seen[n] {
			seen[n] = true
			nodes = append(nodes, n)
		}
	}
	registry.Unlock()
	for _, n := range nodes {
		n.mu.Lock()
		var found *podState
		for _, st := range n.byUID {
			if st.ns == ns && st.name == name && !st.gone {
				found = st
			}
		}
		n.mu.Unlock()
		if found != nil {
			return n, found
		}
	}
	return nil, nil
}

// nodeFor returns the live node that runs the Node object name.
func nodeFor(name string) *Node {
	registry.Lock()
	defer registry.Unlock()
	return registry.nodes[name]
}

// claimNames picks the lowest free hermes-fake-node-N names in the process.
func (n *Node) claimNames(count int) {
	registry.Lock()
	defer registry.Unlock()
	if registry.nodes == nil {
		registry.nodes = map[string]*Node{}
	}
	for i := 1; len(n.names) < count; i++ {
		name := fmt.Sprintf("%s%d", nodePrefix, i)
		if registry.nodes[name] == nil {
			registry.nodes[name] = n
			n.names = append(n.names, name)
		}
	}
}

// createNodes creates the Node objects (replacing any a crashed run left) and marks them Ready.
func (n *Node) createNodes(ctx context.Context) error {
	nodes := n.api.Client.CoreV1().Nodes()
	for _, name := range n.names {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
			}},
		}
		err := nodes.Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the stale Node %s: %w", name, err)
		}
		created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create Node %s: %w", name, err)
		}
		now := metav1.Now()
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("8"),
			corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
		created.Status = corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: kubeapi.Version, ContainerRuntimeVersion: "docker://kubetest", OperatingSystem: "linux", Architecture: "amd64"},
		}
		updated, err := nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("mark Node %s Ready: %w", name, err)
		}
		// The TaintNodesByCondition admission taints a new node not-ready; the node lifecycle
		// controller (absent here) lifts that once the node reports Ready.
		kept := updated.Spec.Taints[:0]
		for _, taint := range updated.Spec.Taints {
			if taint.Key != corev1.TaintNodeNotReady && taint.Key != corev1.TaintNodeUnreachable {
				kept = append(kept, taint)
			}
		}
		if len(kept) != len(updated.Spec.Taints) {
			updated.Spec.Taints = kept
			if _, err := nodes.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("lift the not-ready taint of Node %s: %w", name, err)
			}
		}
	}
	return nil
}

// serve starts the HTTPS endpoint. Every request's context ends when the node stops, so
// proxied watches and exec sessions end with it.
func (n *Node) serve(ctx context.Context) error {
	up, err := n.upstreamTransport()
	if err != nil {
		return err
	}
	n.upstream = &http.Client{Transport: up, Timeout: time.Minute}
	n.srv = httptest.NewUnstartedServer(n.handler(up))
	n.srv.Config.BaseContext = func(net.Listener) context.Context { return ctx }
	n.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshakes of clients that gave up
	n.srv.StartTLS()
	n.URL = n.srv.URL
	n.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: n.srv.Certificate().Raw})
	return nil
}

// shutdown stops the endpoint and the loops, removes every container the node made and
// deletes its Node objects.
func (n *Node) shutdown() {
	n.stop()
	if n.srv != nil {
		n.srv.CloseClientConnections()
		n.srv.Close()
		n.handlers.Wait()
	}
	if n.queue != nil {
		n.queue.ShutDown()
	}
	if n.sandbox != nil {
		n.sandbox.queue.ShutDown()
	}
	if n.ext != nil {
		n.ext.queue.ShutDown()
	}
	n.wg.Wait()
	if n.factory != nil {
		n.factory.Shutdown()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testenv.RemoveContainers(n.docker, labelInstance+"="+n.instance)
	filter := client.Filters{}.Add("label", labelInstance+"="+n.instance)
	if vols, err := n.docker.VolumeList(ctx, client.VolumeListOptions{Filters: filter}); err == nil {
		for _, v := range vols.Items {
			n.docker.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
		}
	}
	for _, name := range n.names {
		n.api.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	}
	registry.Lock()
	for _, name := range n.names {
		if registry.nodes[name] == n {
			delete(registry.nodes, name)
		}
	}
	registry.Unlock()
}
