package kubernetes

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/backends/kubernetes/kubetest"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/dockerimage"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/kubeapi"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// testLabel marks every docker container the fake node makes for this test process; TestMain
// checks that none is left.
const testLabel = "hermes-sandbox.test"

var testRun = fmt.Sprintf("k8s-%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

// TestMain stops the test API server after the tests, then checks for leaked containers.
func TestMain(m *testing.M) { kubeapi.MainWithDocker(m, testLabel, testRun) }

// restricted is the label that makes a namespace enforce the restricted Pod Security profile.
var restricted = map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}

// cluster is a real kube-apiserver, a fake docker-backed node in front of it, and a namespace
// that enforces the restricted profile: everything but exec goes to the real API server.
type cluster struct {
	api   *kubeapi.Server
	node  *kubetest.Node
	ns    string
	image string
	kc    string // admin kubeconfig (through the node's endpoint)
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	api := kubeapi.Start(t)
	img := dockerimage.Busybox(t, "the kubernetes backend's fake node", testenv.DefaultRootfs)
	node := kubetest.StartNode(t, api, kubetest.Options{Label: testLabel, Value: testRun})
	ns := api.Namespace(t, restricted)
	return &cluster{api: api, node: node, ns: ns, image: img, kc: node.Kubeconfig(t, api.AdminToken, ns)}
}

// backend returns a backend on the cluster with state in state ("" = a new directory).
func (c *cluster) backend(t testing.TB, state string, mut func(*config.Config)) *Backend {
	t.Helper()
	return c.backendWith(t, state, mut, Options{})
}

// backendWith is backend with extra options.
func (c *cluster) backendWith(t testing.TB, state string, mut func(*config.Config), extra Options) *Backend {
	t.Helper()
	if state == "" {
		state = t.TempDir()
	}
	cfg := config.NewConfig()
	cfg.Kubernetes.Kubeconfig = c.kc
	cfg.Kubernetes.Image = c.image
	cfg.Kubernetes.WorkspaceSize = 256 * config.Mebibyte
	cfg.Kubernetes.StartTimeout = time.Minute
	if mut != nil {
		mut(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := NewWith(cfg.Kubernetes, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state, Environ: []string{"HOME=" + t.TempDir()}, Logger: testenv.Logger()}), extra)
	if err != nil {
		t.Fatalf("NewWith() = %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
