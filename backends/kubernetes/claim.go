package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// With kubernetes.mode agent-sandbox and a pool, the warm pool is the agent-sandbox
// extensions' own: a SandboxTemplate holding the hardened pod, a SandboxWarmPool of
// kubernetes.pool_size ready Sandboxes made from it, and one SandboxClaim per session, whose
// controller adopts a ready Sandbox (or makes one) and stamps the session's labels onto its
// pod through spec.additionalPodMetadata, so the pod is found by label as in pod mode.

var (
	templateGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	warmPoolGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	claimGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

// warmPoolName names this scope's SandboxTemplate and SandboxWarmPool.
func (b *Backend) warmPoolName() string { return "hermes-" + b.scope.ID() }

// ensureWarmPool creates (or brings up to date) the scope's SandboxTemplate and
// SandboxWarmPool, once per process.
func (b *Backend) ensureWarmPool(ctx context.Context, c *conn) error {
	b.mu.Lock()
	done := b.warmPoolReady
	b.mu.Unlock()
	if done {
		return nil
	}
	name := b.warmPoolName()
	tmpl, err := podTemplate(b.Pod("", ""))
	if err != nil {
		return err
	}
	ours := toAny(map[string]string{labelOurs: "1", labelScope: b.scope.ID(), labelOwner: b.owner})
	template := map[string]any{"podTemplate": tmpl}
	if err := b.apply(ctx, c, templateGVR, "SandboxTemplate", name, ours, template); err != nil {
		return err
	}
	pool := map[string]any{"replicas": int64(b.cfg.PoolSize), "sandboxTemplateRef": map[string]any{"name": name}}
	if err := b.apply(ctx, c, warmPoolGVR, "SandboxWarmPool", name, ours, pool); err != nil {
		return err
	}
	b.mu.Lock()
	b.warmPoolReady = true
	b.mu.Unlock()
	return nil
}

// apply creates the object, or sets its spec (once per process, so a changed setting reaches
// the template and the pool).
func (b *Backend) apply(ctx context.Context, c *conn, gvr schema.GroupVersionResource, kind, name string, labels, spec map[string]any) error {
	res := c.dynamic.Resource(gvr).Namespace(c.namespace)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": c.namespace, "labels": labels},
		"spec":     spec,
	}}
	_, err := res.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := res.Get(ctx, name, metav1.GetOptions{})
		if gerr != nil {
			return b.mapErr("get "+kind, name, gerr)
		}
		cur.Object["spec"] = spec
		_, err = res.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return &sandbox.Error{Backend: Name, Op: "create " + kind, ID: name, Err: fmt.Errorf(
				"kubernetes.pool_size with mode agent-sandbox needs the agent-sandbox extensions (extensions.agents.x-k8s.io %s); install them, or set kubernetes.pool_size 0: %w", kind, sandbox.ErrInvalidConfig)}
		}
		return b.admissionErr("create "+kind, name, err)
	}
	return nil
}

// createClaim claims a Sandbox for session and waits for its pod.
func (b *Backend) createClaim(ctx context.Context, c *conn, session string) (*corev1.Pod, error) {
	if err := b.ensureWarmPool(ctx, c); err != nil {
		return nil, err
	}
	name := b.podName(session)
	labels := b.labels(session)
	labels[labelPool] = "claimed"
	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": claimGVR.GroupVersion().String(), "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "namespace": c.namespace,
			"labels": toAny(map[string]string{labelOurs: "1", labelScope: b.scope.ID(), labelSession: b.sessionHash(session), labelOwner: b.owner})},
		"spec": map[string]any{
			"warmPoolRef":           map[string]any{"name": b.warmPoolName()},
			"additionalPodMetadata": map[string]any{"labels": toAny(labels), "annotations": toAny(b.annotations(session))},
		},
	}}
	_, err := c.dynamic.Resource(claimGVR).Namespace(c.namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, b.admissionErr("create sandbox claim", session, err)
	}
	// The controller binds a Sandbox and labels its pod: wait for the pod to carry our labels.
	deadline := time.Now().Add(b.cfg.StartTimeout)
	rep := b.waitReporter(ctx, "a pod for SandboxClaim "+name)
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 500*time.Millisecond) {
		rep.Tick(func() string { return "the warm pool has none ready and the controller has bound none yet" })
		pod, err := b.findPod(ctx, c, session)
		if err != nil {
			return nil, err
		}
		if pod != nil && !ended(pod) {
			return pod, nil
		}
		if time.Now().After(deadline) {
			why := "is the agent-sandbox extensions controller running?"
			if cur, err := c.dynamic.Resource(claimGVR).Namespace(c.namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
				if sb, _, _ := unstructured.NestedString(cur.Object, "status", "sandbox", "name"); sb != "" {
					why = "it is bound to Sandbox " + sb + ", whose pod does not carry the claim's labels"
				}
			}
			return nil, &sandbox.Error{Backend: Name, Op: "claim sandbox", ID: session,
				Err: fmt.Errorf("the SandboxClaim %s has no pod after %s (kubernetes.start_timeout): %s (kubectl describe sandboxclaim %s): %w", name, b.cfg.StartTimeout, why, name, sandbox.ErrTimeout)}
		}
		if err := sandbox.Sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

// removeClaim deletes the session's SandboxClaim (its controller then deletes the Sandbox and
// its pod); it reports whether there was one.
func (b *Backend) removeClaim(ctx context.Context, c *conn, session string) (bool, error) {
	err := c.dynamic.Resource(claimGVR).Namespace(c.namespace).Delete(ctx, b.podName(session), metav1.DeleteOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, b.mapErr("remove", session, err)
}
