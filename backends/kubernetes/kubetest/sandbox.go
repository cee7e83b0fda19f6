package kubetest

// A minimal agent-sandbox controller (agents.x-k8s.io/v1beta1 Sandbox), for when the test has
// installed the CRDs: one pod per Sandbox, named like it, from spec.podTemplate, controlled by
// it, with status.conditions[Ready], nodeName, podIPs and selector mirrored from the pod. There
// is no garbage collector, so it deletes the pod of a deleted Sandbox itself and completes
// foreground/orphan deletions. Not emulated: operatingMode Suspended, shutdownTime,
// volumeClaimTemplates, the Service. Warm pools and claims are warmpool.go's.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

const (
	sandboxGroup     = "agents.x-k8s.io"
	sandboxVersion   = "v1beta1"
	sandboxHashLabel = "agents.x-k8s.io/sandbox-name-hash"
)

var sandboxGVR = schema.GroupVersionResource{Group: sandboxGroup, Version: sandboxVersion, Resource: "sandboxes"}

type sandboxController struct {
	n     *Node
	queue workqueue.TypedRateLimitingInterface[string] // Sandbox keys ns/name
}

func newSandboxController(n *Node) *sandboxController {
	return &sandboxController{n: n, queue: workqueue.NewTypedRateLimitingQueue(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 5*time.Second))}
}

// start waits (in the node's goroutine) until the Sandbox resource is served, then watches it.
func (c *sandboxController) start(ctx context.Context) {
	c.n.wg.Go(func() {
		for !c.served() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
		factory := dynamicinformer.NewDynamicSharedInformerFactory(c.n.api.Dynamic, 0)
		defer factory.Shutdown()
		inf := factory.ForResource(sandboxGVR)
		add := func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.queue.Add(key)
			}
		}
		if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }, DeleteFunc: add,
		}); err != nil {
			c.n.log.Debug("kubetest: watch sandboxes", "err", err)
			return
		}
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
		lister := inf.Lister()
		for {
			key, quit := c.queue.Get()
			if quit {
				return
			}
			err := c.sync(ctx, lister, key)
			if err != nil && ctx.Err() == nil {
				c.n.log.Debug("kubetest: sync sandbox", "sandbox", key, "err", err)
				c.queue.AddRateLimited(key)
			} else {
				c.queue.Forget(key)
			}
			c.queue.Done(key)
		}
	})
}

// served reports whether the apiserver serves agents.x-k8s.io/v1beta1 sandboxes.
func (c *sandboxController) served() bool {
	list, err := c.n.api.Client.Discovery().ServerResourcesForGroupVersion(sandboxGroup + "/" + sandboxVersion)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "sandboxes" })
}

func (c *sandboxController) sync(ctx context.Context, lister cache.GenericLister, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := lister.ByNamespace(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return c.deletePod(ctx, ns, name, "")
	} else if err != nil {
		return err
	}
	sb, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("sandbox %s is a %T", key, obj)
	}
	if sb.GetDeletionTimestamp() != nil {
		if err := c.deletePod(ctx, ns, name, sb.GetUID()); err != nil {
			return err
		}
		return c.finishDeletion(ctx, sb)
	}
	pod, err := c.n.pods.Pods(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if pod != nil {
		if ref := metav1.GetControllerOf(pod); ref != nil && ref.UID != sb.GetUID() && ref.Kind == "Sandbox" {
			// The pod of an earlier Sandbox of this name: it goes, and a new one comes.
			return c.deletePod(ctx, ns, name, ref.UID)
		}
	}
	if pod == nil {
		if err := c.createPod(ctx, sb); err != nil {
			return err
		}
	}
	return c.writeStatus(ctx, sb, pod)
}

// createPod creates the Sandbox's pod from spec.podTemplate.
func (c *sandboxController) createPod(ctx context.Context, sb *unstructured.Unstructured) error {
	specMap, _, _ := unstructured.NestedMap(sb.Object, "spec", "podTemplate", "spec")
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(specMap, &spec); err != nil {
		return fmt.Errorf("sandbox %s/%s: decode spec.podTemplate.spec: %w", sb.GetNamespace(), sb.GetName(), err)
	}
	podLabels, _, _ := unstructured.NestedStringMap(sb.Object, "spec", "podTemplate", "metadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(sb.Object, "spec", "podTemplate", "metadata", "annotations")
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	podLabels[sandboxHashLabel] = nameHash(sb.GetName())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: sb.GetName(), Namespace: sb.GetNamespace(), Labels: podLabels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: sandboxGroup + "/" + sandboxVersion, Kind: "Sandbox", Name: sb.GetName(), UID: sb.GetUID(),
				Controller: ptr(true), BlockOwnerDeletion: ptr(true),
			}},
		},
		Spec: spec,
	}
	_, err := c.n.api.Client.CoreV1().Pods(sb.GetNamespace()).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // the cache is behind; the pod's event brings us back
	}
	return err
}

// deletePod deletes pod ns/name if a Sandbox controls it (the one with uid, when uid is set).
func (c *sandboxController) deletePod(ctx context.Context, ns, name string, uid types.UID) error {
	pod, err := c.n.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "Sandbox" || !strings.HasPrefix(ref.APIVersion, sandboxGroup+"/") {
		return nil
	}
	if uid != "" && ref.UID != uid {
		return nil
	}
	if pod.DeletionTimestamp != nil {
		return nil
	}
	err = c.n.api.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// finishDeletion removes the garbage collector's finalizers from a deleted Sandbox once its
// pod is gone (foregroundDeletion) or at once (orphan: the pod was not deleted by deletePod
// then either, as its owner reference is what the GC would strip).
func (c *sandboxController) finishDeletion(ctx context.Context, sb *unstructured.Unstructured) error {
	fins := sb.GetFinalizers()
	if !slices.Contains(fins, metav1.FinalizerDeleteDependents) && !slices.Contains(fins, metav1.FinalizerOrphanDependents) {
		return nil
	}
	if _, err := c.n.pods.Pods(sb.GetNamespace()).Get(sb.GetName()); err == nil && slices.Contains(fins, metav1.FinalizerDeleteDependents) {
		return errors.New("waiting for the pod to go") // retried
	}
	sb = sb.DeepCopy()
	sb.SetFinalizers(slices.DeleteFunc(fins, func(f string) bool {
		return f == metav1.FinalizerDeleteDependents || f == metav1.FinalizerOrphanDependents
	}))
	_, err := c.n.api.Dynamic.Resource(sandboxGVR).Namespace(sb.GetNamespace()).Update(ctx, sb, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// writeStatus mirrors the pod into the Sandbox's status, as the upstream controller words it.
func (c *sandboxController) writeStatus(ctx context.Context, sb *unstructured.Unstructured, pod *corev1.Pod) error {
	ready := map[string]any{
		"type": "Ready", "status": "False", "reason": "DependenciesNotReady", "message": "Pod does not exist",
		"observedGeneration": sb.GetGeneration(),
	}
	status := map[string]any{"selector": sandboxHashLabel + "=" + nameHash(sb.GetName())}
	if pod != nil {
		ready["message"] = "Pod exists with phase: " + string(pod.Status.Phase)
		if pod.Status.Phase == corev1.PodRunning {
			ready["message"] = "Pod is Running but not Ready"
			if cond := findCondition(pod.Status.Conditions, corev1.PodReady); cond != nil && cond.Status == corev1.ConditionTrue {
				ready["status"], ready["reason"], ready["message"] = "True", "DependenciesReady", "Pod is Ready"
			}
		}
		if pod.Spec.NodeName != "" {
			status["nodeName"] = pod.Spec.NodeName
		}
		if len(pod.Status.PodIPs) > 0 {
			ips := make([]any, 0, len(pod.Status.PodIPs))
			for _, ip := range pod.Status.PodIPs {
				ips = append(ips, ip.IP)
			}
			status["podIPs"] = ips
		}
	}
	old, _, _ := unstructured.NestedMap(sb.Object, "status")
	ready["lastTransitionTime"] = metav1.Now().UTC().Format(time.RFC3339)
	if conds, ok := old["conditions"].([]any); ok {
		for _, o := range conds {
			if m, ok := o.(map[string]any); ok && m["type"] == "Ready" && m["status"] == ready["status"] {
				ready["lastTransitionTime"] = m["lastTransitionTime"]
			}
		}
	}
	status["conditions"] = []any{ready}
	if jsonEqual(old, status) {
		return nil
	}
	sb = sb.DeepCopy()
	sb.Object["status"] = status
	_, err := c.n.api.Dynamic.Resource(sandboxGVR).Namespace(sb.GetNamespace()).UpdateStatus(ctx, sb, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// jsonEqual compares two JSON-shaped values by their encoding.
func jsonEqual(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// nameHash is the upstream controller's FNV-1a hash of a Sandbox's name (its pods' label).
func nameHash(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("%08x", h.Sum32())
}
