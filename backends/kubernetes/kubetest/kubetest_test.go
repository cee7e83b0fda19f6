package kubetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"k8s.io/streaming/pkg/httpstream"

	"github.com/hermes-sandbox/hermes-sandbox/backends/kubernetes/kubetest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/dockerimage"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/kubeapi"
)

// testLabel marks every container the fake node makes; TestMain fails when any is left.
const testLabel = "hermes-sandbox.test"

var testRun = fmt.Sprintf("kubetest-%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

func TestMain(m *testing.M) { kubeapi.MainWithDocker(m, testLabel, testRun) }

const why = "the fake node runs pods as containers and "

// env is one test's apiserver, node, namespace, test image and an admin client through the node.
type env struct {
	api    *kubeapi.Server
	node   *kubetest.Node
	ns     string
	image  string
	client kubernetes.Interface // admin, through the node's endpoint
	config *rest.Config         // its config
}

func setup(t *testing.T) *env {
	t.Helper()
	image := dockerimage.Busybox(t, why, testenv.DefaultRootfs)
	api := kubeapi.Start(t)
	node := kubetest.StartNode(t, api, kubetest.Options{Label: testLabel, Value: testRun})
	ns := api.Namespace(t, nil)
	cfg := restConfig(t, node, api.AdminToken, ns)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{api: api, node: node, ns: ns, image: image, client: cs, config: cfg}
}

// restConfig loads the node's kubeconfig for token, as a backend would.
func restConfig(t *testing.T, node *kubetest.Node, token, ns string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", node.Kubeconfig(t, token, ns))
	if err != nil {
		t.Fatalf("load the node's kubeconfig: %v", err)
	}
	return cfg
}

// pod creates a pod running `sleep 3600` in the test image; mut adjusts it first.
func (e *env) pod(t *testing.T, name string, mut func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr(false),
			RestartPolicy:                corev1.RestartPolicyNever,
			Containers:                   []corev1.Container{{Name: "main", Image: e.image, Command: []string{"sleep", "3600"}}},
		},
	}
	if mut != nil {
		mut(p)
	}
	created, err := e.client.CoreV1().Pods(e.ns).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return created
}

// wait polls pod name until ok says it is what the test waits for (what), for a minute.
func (e *env) wait(t *testing.T, name, what string, ok func(*corev1.Pod, error) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		p, err := e.client.CoreV1().Pods(e.ns).Get(t.Context(), name, metav1.GetOptions{})
		if ok(p, err) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: not %s after a minute: err=%v status=%+v", name, what, err, statusOf(p))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func statusOf(p *corev1.Pod) any {
	if p == nil {
		return nil
	}
	return p.Status
}

func (e *env) running(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	return e.wait(t, name, "Running", func(p *corev1.Pod, err error) bool {
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
}

// exec runs cmd in pod name through cfg with the SPDY executor (fallback: the WebSocket one
// first, falling back to SPDY as kubectl does).
func execIn(t *testing.T, cfg *rest.Config, ns, name string, cmd []string, stdin string, fallback bool) (stdout, stderr string, err error) {
	t.Helper()
	cs, cerr := kubernetes.NewForConfig(cfg)
	if cerr != nil {
		t.Fatal(cerr)
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: cmd, Stdin: stdin != "", Stdout: true, Stderr: true}, scheme.ParameterCodec)
	var ex remotecommand.Executor
	ex, err = remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		t.Fatal(err)
	}
	if fallback {
		ws, werr := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
		if werr != nil {
			t.Fatal(werr)
		}
		ex, err = remotecommand.NewFallbackExecutor(ws, ex, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	opts := remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}
	if stdin != "" {
		opts.Stdin = strings.NewReader(stdin)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = ex.StreamWithContext(ctx, opts)
	return out.String(), errb.String(), err
}

func TestPodRunsAndExec(t *testing.T) {
	e := setup(t)
	e.pod(t, "runner", nil)
	p := e.running(t, "runner")
	if !strings.HasPrefix(p.Spec.NodeName, "hermes-fake-node-") {
		t.Errorf("spec.nodeName = %q; want a hermes-fake-node-N", p.Spec.NodeName)
	}
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || !strings.HasPrefix(cs[0].ContainerID, "docker://") || !cs[0].Ready || cs[0].State.Running == nil {
		t.Errorf("containerStatuses = %+v; want one ready running docker:// container", cs)
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if c := condition(p, typ); c == nil || c.Status != corev1.ConditionTrue {
			t.Errorf("condition %s = %+v; want True", typ, c)
		}
	}
	if p.Status.PodIP == "" || p.Status.HostIP == "" || p.Status.StartTime == nil {
		t.Errorf("podIP %q hostIP %q startTime %v; want all set", p.Status.PodIP, p.Status.HostIP, p.Status.StartTime)
	}
	// The container is real: its hostname is the pod's name.
	for _, fallback := range []bool{false, true} {
		before := e.node.ExecCount()
		out, errOut, err := execIn(t, e.config, e.ns, "runner", []string{"sh", "-c", "hostname; echo to-stderr >&2"}, "", fallback)
		if err != nil || out != "runner\n" || errOut != "to-stderr\n" {
			t.Errorf("exec (fallback %v) = %q, %q, %v; want %q, %q, nil", fallback, out, errOut, err, "runner\n", "to-stderr\n")
		}
		if got := e.node.ExecCount() - before; got != 1 {
			t.Errorf("ExecCount grew by %d for one exec (fallback %v); want 1 (the WebSocket attempt is refused before serving)", got, fallback)
		}
	}
	// stdin streams to the command.
	out, _, err := execIn(t, e.config, e.ns, "runner", []string{"sh", "-c", "wc -c; cat >/dev/null"}, strings.Repeat("x", 100_000), false)
	if err != nil || strings.TrimSpace(out) != "100000" {
		t.Errorf("exec wc -c with 100000 bytes of stdin = %q, %v; want 100000", out, err)
	}
	// A non-zero exit is an ExitError with the code.
	for _, fallback := range []bool{false, true} {
		_, _, err = execIn(t, e.config, e.ns, "runner", []string{"sh", "-c", "exit 7"}, "", fallback)
		var exit utilexec.CodeExitError
		if !errors.As(err, &exit) || exit.ExitStatus() != 7 {
			t.Errorf("exec exit 7 (fallback %v) = %v (%T); want a CodeExitError with code 7", fallback, err, err)
		}
	}
	// An unknown container is refused as the apiserver refuses it.
	req := e.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.ns).Name("runner").SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "nope", Command: []string{"true"}, Stdout: true}, scheme.ParameterCodec)
	ex, _ := remotecommand.NewSPDYExecutor(e.config, "POST", req.URL())
	err = ex.StreamWithContext(t.Context(), remotecommand.StreamOptions{Stdout: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "container nope is not valid for pod runner") {
		t.Errorf("exec in container nope = %v; want the apiserver's \"container nope is not valid for pod runner\"", err)
	}

	// Latency of one exec round trip (SPDY, through RBAC checks and docker exec).
	var ds []time.Duration
	for range 20 {
		start := time.Now()
		if _, _, err := execIn(t, e.config, e.ns, "runner", []string{"true"}, "", false); err != nil {
			t.Fatalf("exec true = %v", err)
		}
		ds = append(ds, time.Since(start))
	}
	t.Logf("exec round trip: p50 %v, p95 %v over %d", testenv.Percentile(ds, 50), testenv.Percentile(ds, 95), len(ds))
}

func condition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func TestExecForbiddenWithoutRBAC(t *testing.T) {
	e := setup(t)
	e.pod(t, "guarded", nil)
	e.running(t, "guarded")
	before := e.node.ExecCount()
	limited := restConfig(t, e.node, e.api.LimitedToken, e.ns)
	for _, fallback := range []bool{false, true} {
		_, _, err := execIn(t, limited, e.ns, "guarded", []string{"true"}, "", fallback)
		if err == nil || !strings.Contains(err.Error(), `is forbidden: User "`+kubeapi.LimitedUser+`" cannot create resource "pods/exec"`) {
			t.Errorf("exec with the limited token (fallback %v) = %v; want the apiserver's 403 on pods/exec", fallback, err)
		}
	}
	bad := restConfig(t, e.node, "not-a-token", e.ns)
	if _, _, err := execIn(t, bad, e.ns, "guarded", []string{"true"}, "", false); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("exec with a bad token = %v; want Unauthorized", err)
	}
	if n := e.node.ExecCount() - before; n != 0 {
		t.Errorf("ExecCount grew by %d for refused execs; want 0", n)
	}
	// The same token is fine once RBAC allows it: the check is RBAC, not the token.
	_, _, err := execIn(t, e.config, e.ns, "guarded", []string{"true"}, "", false)
	if err != nil {
		t.Errorf("exec as admin = %v; want nil", err)
	}
}

func TestSecurityContextApplied(t *testing.T) {
	e := setup(t)
	e.pod(t, "locked", func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(1000)), FSGroup: ptr(int64(2000))}
		c := &p.Spec.Containers[0]
		c.SecurityContext = &corev1.SecurityContext{
			ReadOnlyRootFilesystem:   ptr(true),
			AllowPrivilegeEscalation: ptr(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			RunAsNonRoot:             ptr(true),
		}
		c.Env = []corev1.EnvVar{{Name: "GREETING", Value: "hi"}, {Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		c.WorkingDir = "/tmp"
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("500m")}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
		p.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("16Mi"))}}}}
	})
	p := e.running(t, "locked")
	script := `id -u; id -g; id -G; pwd; echo $GREETING $POD
if touch /rootfs-write 2>/dev/null; then echo root-writable; else echo root-readonly; fi
printf '#!/bin/sh\necho ran-from-tmp\n' >/tmp/s.sh && chmod +x /tmp/s.sh && /tmp/s.sh
grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status | tr -s '\t ' ' '`
	out, errOut, err := execIn(t, e.config, e.ns, "locked", []string{"sh", "-c", script}, "", false)
	want := "1000\n1000\n1000 2000\n/tmp\nhi locked\nroot-readonly\nran-from-tmp\nCapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n"
	if err != nil || out != want {
		t.Errorf("exec in the locked pod = %q (stderr %q), %v; want %q", out, errOut, err, want)
	}
	// Limits reach the container.
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "docker://")
	ins, err := testenv.DockerEngine(t, why).ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hc := ins.Container.HostConfig; hc.Memory != 64<<20 || hc.NanoCPUs != 500_000_000 {
		t.Errorf("container memory %d, nanoCPUs %d; want %d, %d", hc.Memory, hc.NanoCPUs, 64<<20, 500_000_000)
	}
	mnt, _, err := execIn(t, e.config, e.ns, "locked", []string{"sh", "-c", `grep " /tmp " /proc/mounts; stat -c %a /tmp`}, "", false)
	if err != nil || !strings.HasPrefix(mnt, "tmpfs /tmp tmpfs ") || !strings.Contains(mnt, "size=16384k") || strings.Contains(mnt, "noexec") || !strings.HasSuffix(mnt, "\n1777\n") {
		t.Errorf("the emptyDir at /tmp: %q, %v; want an exec-able 16Mi tmpfs of mode 1777", mnt, err)
	}

	// runAsNonRoot with a root image user: the kubelet refuses to create the container.
	e.pod(t, "rootful", func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)}
	})
	e.wait(t, "rootful", "refused (CreateContainerConfigError)", func(p *corev1.Pod, err error) bool {
		return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
}

func TestDenyAllEgressNetworkPolicy(t *testing.T) {
	e := setup(t)
	policy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-egress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "isolated"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		},
	}
	if _, err := e.client.NetworkingV1().NetworkPolicies(e.ns).Create(t.Context(), policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.pod(t, "isolated", nil)
	e.pod(t, "connected", nil) // not selected: the check must see its eth0
	for name, want := range map[string]string{"isolated": "lo\n", "connected": "eth0\nlo\n"} {
		e.running(t, name)
		out, _, err := execIn(t, e.config, e.ns, name, []string{"ls", "/sys/class/net"}, "", false)
		if err != nil || out != want {
			t.Errorf("pod %s: ls /sys/class/net = %q, %v; want %q", name, out, err, want)
		}
	}
}

func TestDeletionRemovesContainer(t *testing.T) {
	e := setup(t)
	docker := testenv.DockerEngine(t, why)
	e.pod(t, "doomed", nil)
	first := e.running(t, "doomed")
	id := strings.TrimPrefix(first.Status.ContainerStatuses[0].ContainerID, "docker://")
	if _, err := docker.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{}); err != nil {
		t.Fatalf("inspect the pod's container %s: %v", id, err)
	}
	if err := e.client.CoreV1().Pods(e.ns).Delete(t.Context(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wait(t, "doomed", "deleted", func(_ *corev1.Pod, err error) bool { return apierrors.IsNotFound(err) })
	if _, err := docker.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("container %s still exists after its pod was deleted", id)
	}
	// The same name again is a new pod with a new container.
	e.pod(t, "doomed", nil)
	second := e.running(t, "doomed")
	if second.UID == first.UID || second.Status.ContainerStatuses[0].ContainerID == first.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("recreated pod: uid %s container %s; want both new (were %s, %s)", second.UID, second.Status.ContainerStatuses[0].ContainerID, first.UID, first.Status.ContainerStatuses[0].ContainerID)
	}
}

func TestActiveDeadlineAndExit(t *testing.T) {
	e := setup(t)
	e.pod(t, "deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(2)) })
	e.pod(t, "exits", func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"sh", "-c", "exit 3"} })
	e.pod(t, "finishes", func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"true"} })
	e.running(t, "deadline")
	p := e.wait(t, "deadline", "Failed", func(p *corev1.Pod, err error) bool { return err == nil && p.Status.Phase == corev1.PodFailed })
	if p.Status.Reason != "DeadlineExceeded" || p.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("deadline pod: reason %q, container %+v; want DeadlineExceeded and terminated", p.Status.Reason, p.Status.ContainerStatuses[0].State)
	}
	p = e.wait(t, "exits", "Failed", func(p *corev1.Pod, err error) bool { return err == nil && p.Status.Phase == corev1.PodFailed })
	if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 3 || term.Reason != "Error" {
		t.Errorf("exit 3 pod: container state %+v; want terminated with exit code 3, reason Error", p.Status.ContainerStatuses[0].State)
	}
	e.wait(t, "finishes", "Succeeded", func(p *corev1.Pod, err error) bool { return err == nil && p.Status.Phase == corev1.PodSucceeded })
}

func TestKillPod(t *testing.T) {
	e := setup(t)
	e.pod(t, "victim", nil)
	p := e.running(t, "victim")
	if err := e.node.KillPod(e.ns, "victim"); err != nil {
		t.Fatalf("KillPod = %v", err)
	}
	p2, err := e.client.CoreV1().Pods(e.ns).Get(t.Context(), "victim", metav1.GetOptions{})
	if err != nil || p2.Status.Phase != corev1.PodFailed {
		t.Fatalf("after KillPod: pod %v, %v; want Failed", statusOf(p2), err)
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "docker://")
	if _, err := testenv.DockerEngine(t, why).ContainerInspect(t.Context(), id, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("container %s still exists after KillPod", id)
	}
	if _, _, err := execIn(t, e.config, e.ns, "victim", []string{"true"}, "", false); err == nil || !strings.Contains(err.Error(), "container not found") {
		t.Errorf("exec into the killed pod = %v; want the kubelet's container not found", err)
	}
}

func TestSchedulingAndImages(t *testing.T) {
	e := setup(t)
	e.pod(t, "nowhere", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} })
	e.pod(t, "pinned", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "hermes-fake-node-2"}
	})
	e.pod(t, "noimage", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "hermes-sandbox-test/absent:nope" })
	e.wait(t, "nowhere", "Unschedulable", func(p *corev1.Pod, err error) bool {
		c := condition(p, corev1.PodScheduled)
		return err == nil && c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
			strings.Contains(c.Message, "didn't match Pod's node affinity/selector")
	})
	if p := e.running(t, "pinned"); p.Spec.NodeName != "hermes-fake-node-2" {
		t.Errorf("pinned pod on %q; want hermes-fake-node-2", p.Spec.NodeName)
	}
	e.wait(t, "noimage", "waiting on its image", func(p *corev1.Pod, err error) bool {
		if err != nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false
		}
		r := p.Status.ContainerStatuses[0].State.Waiting.Reason
		return p.Status.Phase == corev1.PodPending && (r == "ErrImagePull" || r == "ImagePullBackOff")
	})
}

var sandboxes = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

func TestSandboxGetsPod(t *testing.T) {
	e := setup(t)
	dir := filepath.Join("..", "crds")
	if _, err := os.Stat(dir); err != nil {
		dir = "/work/shared/specs/agent-sandbox"
	}
	e.api.InstallCRDs(t, dir)
	sb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": "box"},
		"spec": map[string]any{"podTemplate": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"role": "agent"}},
			"spec": map[string]any{
				"automountServiceAccountToken": false,
				"containers":                   []any{map[string]any{"name": "main", "image": e.image, "command": []any{"sleep", "3600"}}},
			},
		}},
	}}
	dyn := e.api.Dynamic.Resource(sandboxes).Namespace(e.ns)
	created, err := dyn.Create(t.Context(), sb, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Sandbox: %v", err)
	}
	p := e.running(t, "box")
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != created.GetUID() || ref.Kind != "Sandbox" || p.Labels["role"] != "agent" {
		t.Errorf("pod box: controller %+v, labels %v; want the Sandbox (uid %s) and role=agent", ref, p.Labels, created.GetUID())
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := dyn.Get(t.Context(), "box", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		node, _, _ := unstructured.NestedString(got.Object, "status", "nodeName")
		ips, _, _ := unstructured.NestedStringSlice(got.Object, "status", "podIPs")
		if len(conds) == 1 && conds[0].(map[string]any)["status"] == "True" && node == p.Spec.NodeName && len(ips) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Sandbox status = %v; want Ready True, nodeName %s, one pod IP", got.Object["status"], p.Spec.NodeName)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A deleted pod comes back; a deleted Sandbox takes its pod along.
	if err := e.client.CoreV1().Pods(e.ns).Delete(t.Context(), "box", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wait(t, "box", "recreated", func(q *corev1.Pod, err error) bool {
		return err == nil && q.UID != p.UID && q.Status.Phase == corev1.PodRunning
	})
	if err := dyn.Delete(t.Context(), "box", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wait(t, "box", "deleted with its Sandbox", func(_ *corev1.Pod, err error) bool { return apierrors.IsNotFound(err) })
}

func ptr[T any](v T) *T { return &v }
