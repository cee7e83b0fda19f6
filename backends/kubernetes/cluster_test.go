package kubernetes

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/kubeapi"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// sessionPods lists the pods of b's session name as the API server has them.
func (c *cluster) sessionPods(t *testing.T, b *Backend, session string) []corev1.Pod {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{labelScope: b.scope.ID(), labelSession: b.sessionHash(session)}).String()
	list, err := c.api.Client.CoreV1().Pods(c.ns).List(t.Context(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestFirstCommand: a session's first command makes a pod that the API server admits under
// the restricted profile, uploads the helper and runs as the configured non-root user.
func TestFirstCommand(t *testing.T) {
	c := newCluster(t)
	b := c.backend(t, "", nil)
	sess := testenv.Open(t, b, "first")
	res := testenv.Run(t, sess, "echo hi; id -u; pwd; touch /etc/x 2>/dev/null || echo ro; ls /var/run/secrets/kubernetes.io 2>/dev/null | wc -l")
	if res.Stdout != "hi\n1000\n/workspace\nro\n0\n" {
		t.Errorf("stdout = %q; want hi, uid 1000, /workspace, a read-only root and no service-account token", res.Stdout)
	}
	pods := c.sessionPods(t, b, "first")
	if len(pods) != 1 {
		t.Fatalf("%d pods for the session, want 1", len(pods))
	}
	p := pods[0]
	if p.Spec.SecurityContext.RunAsUser == nil || *p.Spec.SecurityContext.RunAsUser != 1000 || p.Labels[labelOurs] != "1" || p.Annotations[annoSession] != "first" {
		t.Errorf("pod as stored: %+v %v %v", p.Spec.SecurityContext, p.Labels, p.Annotations)
	}
}

// TestAdmissionErrors: what the API server refuses is reported with its own message and a fix.
func TestAdmissionErrors(t *testing.T) {
	c := newCluster(t)
	ctx := testenv.Ctx(t, time.Minute)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceLimitsMemory: resource.MustParse("64Mi")}}}
	q, err := c.api.Client.CoreV1().ResourceQuotas(c.ns).Create(ctx, quota, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No quota controller runs here: write the status it would (nothing used yet), which the
	// API server's quota admission then enforces.
	q.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceLimitsMemory: resource.MustParse("0")}}
	if _, err := c.api.Client.CoreV1().ResourceQuotas(c.ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := c.backend(t, "", func(cfg *config.Config) { cfg.Kubernetes.Memory = 256 * config.Mebibyte })
	sess := testenv.Open(t, b, "big")
	_, err = sess.Exec(ctx, sandbox.Command{Script: "true"})
	if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "exceeded quota") || !strings.Contains(err.Error(), "fix: a ResourceQuota") {
		t.Errorf("over quota: %v; want the API server's message and a fix", err)
	}
	if err := c.api.Client.CoreV1().ResourceQuotas(c.ns).Delete(ctx, "small", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	b = c.backend(t, "", func(cfg *config.Config) { cfg.Kubernetes.RuntimeClass = "kata" })
	_, err = testenv.Open(t, b, "rc").Exec(ctx, sandbox.Command{Script: "true"})
	if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), `no such RuntimeClass (it has: `+kubeapi.RuntimeClass+`)`) {
		t.Errorf("missing RuntimeClass: %v", err)
	}
	if err := b.Check(ctx); err == nil || !strings.Contains(err.Error(), "kata") {
		t.Errorf("doctor with a missing RuntimeClass: %v", err)
	}
	b = c.backend(t, "", func(cfg *config.Config) { cfg.Kubernetes.RuntimeClass = kubeapi.RuntimeClass })
	res := testenv.Run(t, testenv.Open(t, b, "gvisor"), "echo ok")
	if res.Stdout != "ok\n" {
		t.Errorf("with RuntimeClass %s: %q", kubeapi.RuntimeClass, res.Stdout)
	}
	if p := c.sessionPods(t, b, "gvisor"); len(p) != 1 || p[0].Spec.RuntimeClassName == nil || *p[0].Spec.RuntimeClassName != kubeapi.RuntimeClass {
		t.Errorf("the pod does not name the RuntimeClass")
	}
}

// TestDoctorRBAC: Check names each permission the credentials lack, from
// SelfSubjectAccessReviews, and passes for credentials that have them.
func TestDoctorRBAC(t *testing.T) {
	c := newCluster(t)
	ctx := testenv.Ctx(t, time.Minute)
	limited := c.node.Kubeconfig(t, c.api.LimitedToken, c.ns)
	b := c.backend(t, "", func(cfg *config.Config) { cfg.Kubernetes.Kubeconfig = limited })
	err := b.Check(ctx)
	if !errors.Is(err, sandbox.ErrDenied) {
		t.Fatalf("Check with no RBAC = %v; want ErrDenied", err)
	}
	for _, want := range []string{"create pods,", "delete pods", "create pods/exec", "create networkpolicies.networking.k8s.io", "namespace " + c.ns} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check = %v; does not name %q", err, want)
		}
	}
	_, err = testenv.Open(t, b, "s").Exec(ctx, sandbox.Command{Script: "true"})
	if !errors.Is(err, sandbox.ErrDenied) {
		t.Errorf("a command with no RBAC = %v; want ErrDenied", err)
	}
	b = c.backend(t, "", nil)
	if err := b.Check(ctx); err != nil {
		t.Errorf("Check as admin = %v", err)
	}
	if d := b.Describe(); !strings.Contains(d, "namespace "+c.ns) || !strings.Contains(d, "(Kubernetes v") || !strings.Contains(d, "NetworkPolicy-capable CNI") {
		t.Errorf("Describe = %q", d)
	}
}

// TestRecreated: a pod that was evicted, or deleted, is recreated on the next command, which
// reports environment_recreated, also in a new process (backend) with the same state
// directory; state inside the old pod is gone.
func TestRecreated(t *testing.T) {
	c := newCluster(t)
	state := t.TempDir()
	b := c.backend(t, state, nil)
	sess := testenv.Open(t, b, "phoenix")
	if res := testenv.Run(t, sess, "cd /tmp && export HERMES_P=1 && touch /workspace/mark"); res.EnvironmentRecreated {
		t.Error("the first command reports environment_recreated")
	}
	old := c.sessionPods(t, b, "phoenix")[0]
	if err := c.node.KillPod(c.ns, old.Name); err != nil {
		t.Fatal(err)
	}
	res := testenv.Run(t, sess, `echo "$PWD ${HERMES_P:-unset}"; ls /workspace`)
	if !res.EnvironmentRecreated || res.Stdout != "/workspace unset\n" {
		t.Errorf("after eviction: recreated=%v stdout=%q; want a fresh environment", res.EnvironmentRecreated, res.Stdout)
	}
	pods := c.sessionPods(t, b, "phoenix")
	if len(pods) != 1 || pods[0].UID == old.UID {
		t.Fatalf("after eviction: %d pods, want one new pod", len(pods))
	}
	sess.Close()

	// Deleted while no process held the session: the next process notices.
	zero := int64(0)
	if err := c.api.Client.CoreV1().Pods(c.ns).Delete(t.Context(), pods[0].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	b2 := c.backend(t, state, nil)
	res = testenv.Run(t, testenv.Open(t, b2, "phoenix"), "echo again")
	if !res.EnvironmentRecreated || res.Stdout != "again\n" {
		t.Errorf("deleted pod, new process: recreated=%v stdout=%q", res.EnvironmentRecreated, res.Stdout)
	}
	// A session removed on purpose starts fresh without the flag.
	if err := b2.Remove(t.Context(), "phoenix"); err != nil {
		t.Fatal(err)
	}
	if err := b2.Remove(t.Context(), "phoenix"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("second Remove = %v; want ErrNotFound", err)
	}
	if res := testenv.Run(t, testenv.Open(t, c.backend(t, state, nil), "phoenix"), "true"); res.EnvironmentRecreated {
		t.Error("a removed session's next command reports environment_recreated")
	}
}

// TestNetwork: without kubernetes.network_enabled the deny-all egress policy exists and
// selects the pod (the fake node, like a NetworkPolicy-enforcing CNI, leaves it only lo); with
// it, the pod is not selected.
func TestNetwork(t *testing.T) {
	c := newCluster(t)
	b := c.backend(t, "", nil)
	res := testenv.Run(t, testenv.Open(t, b, "closed"), "ls /sys/class/net | tr '\\n' ' '")
	if res.Stdout != "lo " {
		t.Errorf("interfaces with the deny-all policy: %q; want only lo", res.Stdout)
	}
	np, err := c.api.Client.NetworkingV1().NetworkPolicies(c.ns).Get(t.Context(), b.policyName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the deny-all policy: %v", err)
	}
	if len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 1 {
		t.Errorf("policy spec = %+v", np.Spec)
	}
	if e := b.Egress(); e.Status != sandbox.EgressNone {
		t.Errorf("Egress() = %+v", e)
	}
	open := c.backend(t, "", func(cfg *config.Config) { cfg.Kubernetes.NetworkEnabled = true })
	res = testenv.Run(t, testenv.Open(t, open, "open"), "ls /sys/class/net | grep -c -v '^lo$'")
	if strings.TrimSpace(res.Stdout) == "0" {
		t.Errorf("with network_enabled the pod has no interface but lo")
	}
	if p := c.sessionPods(t, open, "open"); p[0].Labels[labelEgress] != "" {
		t.Errorf("a pod with network_enabled is selected by the deny-all policy")
	}
}

// TestAgentSandboxMode: with the agent-sandbox CRDs, a session is an agents.x-k8s.io Sandbox
// whose controller makes the pod; Remove deletes the Sandbox. Without the CRDs the error says
// how to fix it.
func TestAgentSandboxMode(t *testing.T) {
	c := newCluster(t)
	ctx := testenv.Ctx(t, 2*time.Minute)
	b := c.backend(t, "", func(cfg *config.Config) { cfg.Kubernetes.Mode = config.KubernetesModeAgentSandbox })
	if _, err := c.api.Client.Discovery().ServerResourcesForGroupVersion(sandboxGVR.GroupVersion().String()); err != nil {
		_, err := testenv.Open(t, b, "nocrd").Exec(ctx, sandbox.Command{Script: "true"})
		if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "install agent-sandbox") {
			t.Errorf("agent-sandbox mode without the CRDs: %v", err)
		}
	} else {
		// The CRDs are the process's, and an earlier test (shuffled or selected) installed them.
		t.Log("the CRDs were already installed: the error without them is not checked in this run")
	}
	c.api.InstallCRDs(t, "crds")
	res := testenv.Run(t, testenv.Open(t, b, "claimed"), "echo in-sandbox; id -u")
	if res.Stdout != "in-sandbox\n1000\n" {
		t.Errorf("stdout = %q", res.Stdout)
	}
	sb, err := c.api.Dynamic.Resource(sandboxGVR).Namespace(c.ns).Get(ctx, b.podName("claimed"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Sandbox: %v", err)
	}
	if cs, _, _ := unstructured.NestedSlice(sb.Object, "spec", "podTemplate", "spec", "containers"); len(cs) != 1 {
		t.Errorf("the Sandbox's pod template has %d containers, want 1", len(cs))
	}
	if err := b.Remove(ctx, "claimed"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.api.Dynamic.Resource(sandboxGVR).Namespace(c.ns).Get(ctx, b.podName("claimed"), metav1.GetOptions{}); err == nil {
		t.Error("the Sandbox is still there after Remove")
	}
}

// TestPoolSessionsGC: a warm pod is handed to a new session and the pool is refilled;
// sessions are listed; gc removes an ended pod and keeps what is in use, and never touches
// another state directory's pods.
func TestPoolSessionsGC(t *testing.T) {
	c := newCluster(t)
	ctx := testenv.Ctx(t, 3*time.Minute)
	state := t.TempDir()
	b := c.backend(t, state, func(cfg *config.Config) { cfg.Kubernetes.PoolSize = 1 })
	if st, err := b.PoolStats(ctx); err != nil || st != (sandbox.PoolStats{Size: 1}) {
		t.Errorf("PoolStats before any session = %+v, %v; want size 1, none ready", st, err)
	}
	testenv.Run(t, testenv.Open(t, b, "one"), "true") // makes its own pod and fills the pool
	cn, _ := b.cluster()
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := cn.api.pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: b.poolSelector()})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 && list.Items[0].Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool has %d pods, none running after a minute", len(list.Items))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, err := b.PoolStats(ctx); err != nil || st != (sandbox.PoolStats{Size: 1, Ready: 1}) {
		t.Errorf("PoolStats with the warm pod running = %+v, %v; want size 1, 1 ready", st, err)
	}
	testenv.Run(t, testenv.Open(t, b, "two"), "true")
	if p := c.sessionPods(t, b, "two"); len(p) != 1 || !strings.Contains(p[0].Name, "-pool-") {
		t.Errorf("session two did not take the warm pod: %v", p)
	}
	// A session whose settings differ (here, a RuntimeClass) never takes a warm pod made
	// without them (and its refill replaces those).
	iso := c.backend(t, state, func(cfg *config.Config) {
		cfg.Kubernetes.PoolSize, cfg.Kubernetes.RuntimeClass = 1, kubeapi.RuntimeClass
	})
	testenv.Run(t, testenv.Open(t, iso, "iso"), "true")
	if p := c.sessionPods(t, iso, "iso"); len(p) != 1 || p[0].Spec.RuntimeClassName == nil || *p[0].Spec.RuntimeClassName != kubeapi.RuntimeClass {
		t.Errorf("a session with runtime_class %s got a pod without it", kubeapi.RuntimeClass)
	}
	if err := iso.Remove(ctx, "iso"); err != nil {
		t.Fatal(err)
	}
	infos, err := b.Sessions(ctx)
	if err != nil || len(infos) != 2 || infos[0].Name != "one" || infos[1].Name != "two" || infos[0].State != "running" {
		t.Errorf("Sessions = %+v, %v", infos, err)
	}

	other := c.backend(t, "", nil)
	testenv.Run(t, testenv.Open(t, other, "theirs"), "true")
	if err := c.node.KillPod(c.ns, c.sessionPods(t, b, "one")[0].Name); err != nil {
		t.Fatal(err)
	}
	rep, err := b.Collect(ctx, sandbox.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	removed, sessionOne := "", false
	for _, it := range rep.Removed {
		removed += it.Name + " (" + it.Reason + ") "
		switch {
		case strings.Contains(it.Name, "(session one)") && strings.HasPrefix(it.Reason, "ended"):
			sessionOne = true
		case strings.Contains(it.Name, "-pool-") && strings.Contains(it.Reason, "other settings"):
			// the iso backend's warm pod, made with a RuntimeClass this backend does not use
		default:
			t.Errorf("gc removed %s (%s)", it.Name, it.Reason)
		}
	}
	if !sessionOne {
		t.Errorf("gc removed %q; want session one's ended pod among them", removed)
	}
	if len(c.sessionPods(t, other, "theirs")) != 1 || len(c.sessionPods(t, b, "two")) != 1 {
		t.Error("gc removed a pod in use or another state directory's pod")
	}
	if rep, _ := b.Collect(ctx, sandbox.GCOptions{IdleTimeout: time.Nanosecond, DryRun: true}); len(rep.Removed) != 1 {
		t.Errorf("dry-run gc with a tiny idle timeout would remove %+v; want session two only", rep.Removed)
	}
}

// TestAgentSandboxWarmPool: with mode agent-sandbox and a pool, the backend keeps a
// SandboxTemplate of the hardened pod and a SandboxWarmPool, and each session is a
// SandboxClaim whose controller hands it a warm Sandbox; the session's pod is found by the
// labels the claim stamps on it, and removing the session deletes the claim and its pod.
func TestAgentSandboxWarmPool(t *testing.T) {
	c := newCluster(t)
	c.api.InstallCRDs(t, "crds")
	ctx := testenv.Ctx(t, 3*time.Minute)
	b := c.backend(t, "", func(cfg *config.Config) {
		cfg.Kubernetes.Mode, cfg.Kubernetes.PoolSize = config.KubernetesModeAgentSandbox, 2
	})
	res := testenv.Run(t, testenv.Open(t, b, "warm"), "echo claimed; id -u")
	if res.Stdout != "claimed\n1000\n" {
		t.Errorf("stdout = %q", res.Stdout)
	}
	claim, err := c.api.Dynamic.Resource(claimGVR).Namespace(c.ns).Get(ctx, b.podName("warm"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the SandboxClaim: %v", err)
	}
	bound, _, _ := unstructured.NestedString(claim.Object, "status", "sandbox", "name")
	pods := c.sessionPods(t, b, "warm")
	if len(pods) != 1 || bound == "" || pods[0].Name != bound {
		t.Fatalf("the claim is bound to %q; the session's pods: %d", bound, len(pods))
	}
	for _, gvr := range []schema.GroupVersionResource{templateGVR, warmPoolGVR} {
		if _, err := c.api.Dynamic.Resource(gvr).Namespace(c.ns).Get(ctx, b.warmPoolName(), metav1.GetOptions{}); err != nil {
			t.Errorf("%s: %v", gvr.Resource, err)
		}
	}
	// The pool's ready count is its SandboxWarmPool's, as the controller reports it.
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := b.PoolStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st == (sandbox.PoolStats{Size: 2, Ready: 2}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PoolStats = %+v after a minute; want size 2, 2 ready", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A second session, and the pool keeps its size.
	testenv.Run(t, testenv.Open(t, b, "warm2"), "true")
	if p := c.sessionPods(t, b, "warm2"); len(p) != 1 || p[0].Name == bound {
		t.Errorf("the second session shares the first's pod")
	}
	if err := b.Remove(ctx, "warm"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute)
	for len(c.sessionPods(t, b, "warm")) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the removed session's pod is still there after a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.api.Dynamic.Resource(claimGVR).Namespace(c.ns).Get(ctx, b.podName("warm"), metav1.GetOptions{}); err == nil {
		t.Error("the claim is still there after Remove")
	}
}

// TestGCOwnerGone: the pods of a process that removes its sessions when done (an MCP server)
// are removed by gc once that process is gone, however recently they were used; those of a
// live owner, and persistent sessions, stay.
func TestGCOwnerGone(t *testing.T) {
	c := newCluster(t)
	ctx := testenv.Ctx(t, 3*time.Minute)
	state := t.TempDir()
	deadOwner := testenv.GoneOwner(t) // a process that has exited

	dead := c.backend(t, state, nil)
	dead.process = deadOwner
	live := c.backend(t, state, nil)
	live.process = sandbox.ProcessOwner()
	kept := c.backend(t, state, nil)
	for _, s := range []struct {
		b    *Backend
		name string
	}{{dead, "mcp-dead"}, {live, "mcp-live"}, {kept, "kept"}} {
		testenv.Run(t, testenv.Open(t, s.b, s.name), "true")
	}
	rep, err := kept.Collect(ctx, sandbox.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 1 || !strings.Contains(rep.Removed[0].Name, "(session mcp-dead)") || !strings.Contains(rep.Removed[0].Reason, "is gone") {
		t.Errorf("gc removed %+v; want only mcp-dead's pod, its owner gone", rep.Removed)
	}
	if len(c.sessionPods(t, dead, "mcp-dead")) != 0 {
		t.Error("mcp-dead's pod is still there")
	}
	for _, s := range []struct {
		b    *Backend
		name string
	}{{live, "mcp-live"}, {kept, "kept"}} {
		if len(c.sessionPods(t, s.b, s.name)) != 1 {
			t.Errorf("gc removed %s's pod", s.name)
		}
	}
}

// TestUnschedulableWaitReports: a pod no node can take is not waited for in silence: every
// few seconds the start says what it waits for and why, on the caller's progress writer, and
// kubernetes.start_timeout ends it with the same reason.
func TestUnschedulableWaitReports(t *testing.T) {
	c := newCluster(t)
	var progress sandboxtest.SyncBuffer
	b := c.backendWith(t, "", func(cfg *config.Config) {
		cfg.Kubernetes.NodeSelector = map[string]string{"pool": "none-has-it"}
		cfg.Kubernetes.StartTimeout = 4 * time.Second
	}, Options{WaitReport: time.Second})
	ctx := sandbox.WithProgress(testenv.Ctx(t, time.Minute), &progress)
	sess, err := b.Open(ctx, "nowhere")
	if err == nil {
		defer sess.Close()
		_, err = sess.Exec(ctx, sandbox.Command{Script: "true"})
	}
	if !errors.Is(err, sandbox.ErrTimeout) || !strings.Contains(err.Error(), "Unschedulable") {
		t.Errorf("start on no node = %v; want a timeout naming Unschedulable", err)
	}
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "kubernetes: waiting ") || !strings.Contains(lines[0], "(kubernetes.start_timeout) for pod ") ||
		!strings.Contains(progress.String(), "Unschedulable") {
		t.Errorf("progress while waiting = %q; want a line a second naming the pod and why it waits", progress.String())
	}
}
