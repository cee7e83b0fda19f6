package kubetest_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/hermes-sandbox/hermes-sandbox/backends/kubernetes/kubetest"
)

var (
	templates = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	warmPools = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	claims    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

// installCRDs installs the agent-sandbox CRDs (after StartNode: the controllers pick them up).
func (e *env) installCRDs(t *testing.T) {
	t.Helper()
	dir := filepath.Join("..", "crds")
	if _, err := os.Stat(dir); err != nil {
		dir = "/work/shared/specs/agent-sandbox"
	}
	e.api.InstallCRDs(t, dir)
}

func (e *env) res(gvr schema.GroupVersionResource) dynamic.ResourceInterface {
	return e.api.Dynamic.Resource(gvr).Namespace(e.ns)
}

func (e *env) create(t *testing.T, gvr schema.GroupVersionResource, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	created, err := e.res(gvr).Create(t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return created
}

func (e *env) template(t *testing.T, name string) {
	e.create(t, templates, map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"podTemplate": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"role": "agent"}, "annotations": map[string]any{"from": "template"}},
			"spec": map[string]any{
				"automountServiceAccountToken": false,
				"containers":                   []any{map[string]any{"name": "main", "image": e.image, "command": []any{"sleep", "3600"}}},
			},
		}},
	})
}

func (e *env) warmPool(t *testing.T, name, template string, replicas int64) {
	e.create(t, warmPools, map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"replicas": replicas, "sandboxTemplateRef": map[string]any{"name": template}},
	})
}

func (e *env) claim(t *testing.T, name, pool string) *unstructured.Unstructured {
	return e.create(t, claims, map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"warmPoolRef": map[string]any{"name": pool},
			"additionalPodMetadata": map[string]any{
				"labels":      map[string]any{"claimed-by": name, "role": "claimed"},
				"annotations": map[string]any{"claim": name},
			},
		},
	})
}

// poll calls check until it returns "" (done) or a minute passes, then fails with its last word.
func poll(t *testing.T, what string, check func() string) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(time.Minute)
	for {
		msg := check()
		if msg == "" {
			t.Logf("%s after %v", what, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after a minute: %s", what, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unclaimed lists the pool's unclaimed Sandboxes (labelled and controlled by it), by name.
func (e *env) unclaimed(t *testing.T, pool string) map[string]*unstructured.Unstructured {
	t.Helper()
	list, err := e.res(sandboxes).List(t.Context(), metav1.ListOptions{LabelSelector: kubetest.WarmPoolLabel + "=" + pool})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		sb := &list.Items[i]
		if ref := metav1.GetControllerOf(sb); ref != nil && ref.Kind == "SandboxWarmPool" && ref.Name == pool && sb.GetDeletionTimestamp() == nil {
			out[sb.GetName()] = sb
		}
	}
	return out
}

// podReady says why pod name is not Running and Ready ("" when it is).
func (e *env) podReady(t *testing.T, name string) string {
	p, err := e.client.CoreV1().Pods(e.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if c := condition(p, corev1.PodReady); p.Status.Phase != corev1.PodRunning || c == nil || c.Status != corev1.ConditionTrue {
		return fmt.Sprintf("pod %s is %s, ready %+v", name, p.Status.Phase, c)
	}
	return ""
}

// fullPool waits until the pool has want unclaimed Sandboxes with Ready pods and says so in its status.
func (e *env) fullPool(t *testing.T, pool string, want int64) map[string]*unstructured.Unstructured {
	t.Helper()
	var sbs map[string]*unstructured.Unstructured
	poll(t, fmt.Sprintf("warm pool %s with %d ready", pool, want), func() string {
		sbs = e.unclaimed(t, pool)
		if int64(len(sbs)) != want {
			return fmt.Sprintf("%d unclaimed Sandboxes", len(sbs))
		}
		for name := range sbs {
			if msg := e.podReady(t, name); msg != "" {
				return msg
			}
		}
		got, err := e.res(warmPools).Get(t.Context(), pool, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		replicas, _, _ := unstructured.NestedInt64(got.Object, "status", "replicas")
		ready, _, _ := unstructured.NestedInt64(got.Object, "status", "readyReplicas")
		selector, _, _ := unstructured.NestedString(got.Object, "status", "selector")
		observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
		if replicas != want || ready != want || selector != kubetest.WarmPoolLabel+"="+pool || observed != got.GetGeneration() {
			return fmt.Sprintf("status %v (generation %d)", got.Object["status"], got.GetGeneration())
		}
		return ""
	})
	return sbs
}

// boundReady waits until the claim names its Sandbox and is Ready, and returns the Sandbox's name.
func (e *env) boundReady(t *testing.T, claim string) string {
	t.Helper()
	var name string
	poll(t, "claim "+claim+" Ready", func() string {
		got, err := e.res(claims).Get(t.Context(), claim, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		name, _, _ = unstructured.NestedString(got.Object, "status", "sandbox", "name")
		ips, _, _ := unstructured.NestedStringSlice(got.Object, "status", "sandbox", "podIPs")
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" && m["reason"] == "SandboxReady" && name != "" && len(ips) == 1 {
				return ""
			}
		}
		return fmt.Sprintf("status %v", got.Object["status"])
	})
	return name
}

// checkClaimed checks that claim's Sandbox and pod are the claim's, with its additional metadata.
func (e *env) checkClaimed(t *testing.T, claim *unstructured.Unstructured, sbName string) {
	t.Helper()
	sb, err := e.res(sandboxes).Get(t.Context(), sbName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(sb)
	if ref == nil || ref.Kind != "SandboxClaim" || ref.UID != claim.GetUID() || ref.APIVersion != "extensions.agents.x-k8s.io/v1beta1" || len(sb.GetOwnerReferences()) != 1 {
		t.Errorf("Sandbox %s: owners %+v; want only the claim %s (uid %s) as controller", sbName, sb.GetOwnerReferences(), claim.GetName(), claim.GetUID())
	}
	if _, ok := sb.GetLabels()[kubetest.WarmPoolLabel]; ok {
		t.Errorf("Sandbox %s still has labels %v; want no %s", sbName, sb.GetLabels(), kubetest.WarmPoolLabel)
	}
	ptLabels, _, _ := unstructured.NestedStringMap(sb.Object, "spec", "podTemplate", "metadata", "labels")
	ptAnns, _, _ := unstructured.NestedStringMap(sb.Object, "spec", "podTemplate", "metadata", "annotations")
	if ptLabels["claimed-by"] != claim.GetName() || ptLabels["role"] != "claimed" || ptLabels[kubetest.WarmPoolLabel] != "" || ptAnns["claim"] != claim.GetName() || ptAnns["from"] != "template" {
		t.Errorf("Sandbox %s podTemplate metadata: labels %v annotations %v; want the claim's merged over the template's, no %s", sbName, ptLabels, ptAnns, kubetest.WarmPoolLabel)
	}
	poll(t, "pod "+sbName+" with the claim's metadata", func() string {
		p, err := e.client.CoreV1().Pods(e.ns).Get(t.Context(), sbName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if _, ok := p.Labels[kubetest.WarmPoolLabel]; ok || p.Labels["claimed-by"] != claim.GetName() || p.Labels["role"] != "claimed" ||
			p.Annotations["claim"] != claim.GetName() || p.Annotations["from"] != "template" {
			return fmt.Sprintf("labels %v annotations %v", p.Labels, p.Annotations)
		}
		return ""
	})
}

func TestWarmPoolAndClaims(t *testing.T) {
	e := setup(t)
	e.installCRDs(t) // after StartNode
	e.template(t, "tmpl")
	e.warmPool(t, "pool", "tmpl", 2)
	warm := e.fullPool(t, "pool", 2)
	for name, sb := range warm {
		ref := metav1.GetControllerOf(sb)
		ptLabels, _, _ := unstructured.NestedStringMap(sb.Object, "spec", "podTemplate", "metadata", "labels")
		if ref == nil || ref.Kind != "SandboxWarmPool" || ref.Name != "pool" || len(name) != len("pool-")+5 || ptLabels[kubetest.WarmPoolLabel] != "pool" || ptLabels["role"] != "agent" {
			t.Errorf("warm Sandbox %s: controller %+v, podTemplate labels %v; want pool-XXXXX controlled by the pool, labelled", name, ref, ptLabels)
		}
		p, err := e.client.CoreV1().Pods(e.ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || p.Labels[kubetest.WarmPoolLabel] != "pool" {
			t.Errorf("pod %s: %v, labels %v; want %s=pool", name, err, labelsOf(p), kubetest.WarmPoolLabel)
		}
	}

	// A claim adopts a warm Sandbox; the pool refills.
	c1 := e.claim(t, "c1", "pool")
	sb1 := e.boundReady(t, "c1")
	if warm[sb1] == nil {
		t.Errorf("claim c1 got Sandbox %s; want one of the warm %v", sb1, slices.Collect(maps.Keys(warm)))
	}
	e.checkClaimed(t, c1, sb1)
	refilled := e.fullPool(t, "pool", 2)
	if refilled[sb1] != nil {
		t.Errorf("the claimed Sandbox %s is still among the pool's unclaimed", sb1)
	}

	// Two claims at once get two different Sandboxes.
	var wg sync.WaitGroup
	created := make([]*unstructured.Unstructured, 2)
	for i, name := range []string{"c2", "c3"} {
		wg.Go(func() {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
				"metadata": map[string]any{"name": name},
				"spec": map[string]any{"warmPoolRef": map[string]any{"name": "pool"},
					"additionalPodMetadata": map[string]any{"labels": map[string]any{"claimed-by": name, "role": "claimed"}, "annotations": map[string]any{"claim": name}}},
			}}
			created[i], _ = e.res(claims).Create(t.Context(), u, metav1.CreateOptions{})
		})
	}
	wg.Wait()
	if created[0] == nil || created[1] == nil {
		t.Fatal("creating claims c2 and c3 failed")
	}
	sb2, sb3 := e.boundReady(t, "c2"), e.boundReady(t, "c3")
	if sb2 == sb3 || sb2 == sb1 || sb3 == sb1 {
		t.Errorf("claims c1, c2, c3 got Sandboxes %s, %s, %s; want three different", sb1, sb2, sb3)
	}
	e.checkClaimed(t, created[0], sb2)
	e.checkClaimed(t, created[1], sb3)
	refilled = e.fullPool(t, "pool", 2)

	// A deleted claim takes its Sandbox and pod along.
	if err := e.res(claims).Delete(t.Context(), "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "Sandbox "+sb1+" deleted with its claim", func() string {
		if _, err := e.res(sandboxes).Get(t.Context(), sb1, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("get = %v", err)
		}
		return ""
	})
	e.wait(t, sb1, "deleted with its claim's Sandbox", func(_ *corev1.Pod, err error) bool { return apierrors.IsNotFound(err) })

	// Scaling to 0 deletes the unclaimed Sandboxes, not the claimed ones.
	patch := []byte(`{"spec":{"replicas":0}}`)
	if _, err := e.res(warmPools).Patch(t.Context(), "pool", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.fullPool(t, "pool", 0)
	for name := range refilled {
		e.wait(t, name, "deleted with the pool's scale-down", func(_ *corev1.Pod, err error) bool { return apierrors.IsNotFound(err) })
	}
	for _, name := range []string{sb2, sb3} {
		if msg := e.podReady(t, name); msg != "" {
			t.Errorf("claimed Sandbox %s after the scale-down: %s", name, msg)
		}
	}
}

func TestClaimColdStartAndPoolDeletion(t *testing.T) {
	e := setup(t)
	e.installCRDs(t)
	e.template(t, "tmpl")
	e.warmPool(t, "empty", "tmpl", 0)
	e.fullPool(t, "empty", 0)
	cold := e.claim(t, "cold", "empty")
	if got := e.boundReady(t, "cold"); got != "cold" {
		t.Errorf("claim cold on an empty pool got Sandbox %q; want one named like the claim", got)
	}
	e.checkClaimed(t, cold, "cold")

	// A claim of a pool that does not exist waits, saying so.
	e.claim(t, "lost", "nope")
	poll(t, "claim lost not Ready (WarmPoolNotFound)", func() string {
		got, err := e.res(claims).Get(t.Context(), "lost", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		if len(conds) == 1 && conds[0].(map[string]any)["status"] == "False" && conds[0].(map[string]any)["reason"] == "WarmPoolNotFound" {
			return ""
		}
		return fmt.Sprintf("status %v", got.Object["status"])
	})

	// A deleted pool takes its unclaimed Sandboxes along, not the claimed one.
	e.warmPool(t, "doomed", "tmpl", 1)
	warm := e.fullPool(t, "doomed", 1)
	if err := e.res(warmPools).Delete(t.Context(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for name := range warm {
		e.wait(t, name, "deleted with its pool", func(_ *corev1.Pod, err error) bool { return apierrors.IsNotFound(err) })
	}
	if msg := e.podReady(t, "cold"); msg != "" {
		t.Errorf("the cold claim's pod after deleting another pool: %s", msg)
	}

	// Foreground deletion of the claim: it goes once its Sandbox (and pod) went.
	fg := metav1.DeletePropagationForeground
	if err := e.res(claims).Delete(t.Context(), "cold", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	poll(t, "claim cold gone (foreground)", func() string {
		if _, err := e.res(claims).Get(t.Context(), "cold", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("get = %v", err)
		}
		return ""
	})
	e.wait(t, "cold", "deleted before its claim", func(_ *corev1.Pod, err error) bool { return apierrors.IsNotFound(err) })
}

func labelsOf(p *corev1.Pod) map[string]string {
	if p == nil {
		return nil
	}
	return p.Labels
}
