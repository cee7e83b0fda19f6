package kubetest

// A minimal agent-sandbox extensions controller (extensions.agents.x-k8s.io/v1beta1), for when
// the test has installed the CRDs:
//
//   - SandboxWarmPool keeps spec.replicas unclaimed Sandboxes, made from the podTemplate of the
//     SandboxTemplate spec.sandboxTemplateRef names, generateName "<pool>-", labelled
//     WarmPoolLabel=<pool> (the Sandbox and its podTemplate, so the pod too) and controlled by
//     the pool. It deletes extras (not-ready first), deletes its unclaimed Sandboxes when the
//     pool goes, and writes status replicas, readyReplicas, selector and observedGeneration.
//   - SandboxClaim adopts an unclaimed Sandbox of spec.warmPoolRef's pool (Ready pods first):
//     in one update guarded by the Sandbox's resourceVersion, the claim replaces the pool as its
//     controller, WarmPoolLabel comes off the Sandbox and its podTemplate, and
//     spec.additionalPodMetadata goes into its spec.podTemplate.metadata; then a merge patch
//     does the same to the pod. With nothing to adopt it creates a Sandbox named like the claim
//     from the pool's template (a cold start). Status: sandbox.name, sandbox.podIPs and a Ready
//     condition; a deleted claim takes its Sandbox along.
//
// There is no garbage collector, so deleted owners' Sandboxes are deleted here and foreground /
// orphan deletions of pools and claims are completed as sandbox.go does for Sandboxes. Every
// sync reads the objects it acts on from the apiserver (not a cache) and holds extMu, so the
// controllers of several nodes of one process never act on one pool or claim at once (no
// duplicate warm Sandboxes, no Sandbox adopted twice). Not emulated: updateStrategy, the
// template's networkPolicy and env/volume injection, claim lifecycle (shutdownTime,
// ttlSecondsAfterFinished), volumeClaimTemplates, events.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

const (
	extGroup   = "extensions.agents.x-k8s.io"
	extVersion = "v1beta1"

	// WarmPoolLabel marks an unclaimed Sandbox of a SandboxWarmPool (and its pod) with the
	// pool's name. An adopting claim removes it.
	WarmPoolLabel = "agents.x-k8s.io/warm-pool"

	kindPool  = "SandboxWarmPool"
	kindClaim = "SandboxClaim"
)

var (
	templateGVR = schema.GroupVersionResource{Group: extGroup, Version: extVersion, Resource: "sandboxtemplates"}
	poolGVR     = schema.GroupVersionResource{Group: extGroup, Version: extVersion, Resource: "sandboxwarmpools"}
	claimGVR    = schema.GroupVersionResource{Group: extGroup, Version: extVersion, Resource: "sandboxclaims"}
)

// extMu serializes the syncs of every node's extensions controller in the process (they share
// the process's one apiserver).
var extMu sync.Mutex

type extController struct {
	n     *Node
	queue workqueue.TypedRateLimitingInterface[string] // "pool/ns/name" or "claim/ns/name"

	sandboxes, pools, claims cache.GenericLister // for routing events only
}

func newExtController(n *Node) *extController {
	return &extController{n: n, queue: workqueue.NewTypedRateLimitingQueue(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 5*time.Second))}
}

// start waits (in the node's goroutine) until Sandboxes and the extensions are served, then
// watches them and the pods.
func (c *extController) start(ctx context.Context) {
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
		sbInf, poolInf, claimInf, tmplInf := factory.ForResource(sandboxGVR), factory.ForResource(poolGVR),
			factory.ForResource(claimGVR), factory.ForResource(templateGVR)
		c.sandboxes, c.pools, c.claims = sbInf.Lister(), poolInf.Lister(), claimInf.Lister()
		handlers := []struct {
			inf cache.SharedIndexInformer
			fn  func(*unstructured.Unstructured)
		}{
			{sbInf.Informer(), c.sandboxChanged},
			{poolInf.Informer(), c.poolChanged},
			{claimInf.Informer(), func(u *unstructured.Unstructured) { c.enqueue("claim", u.GetNamespace(), u.GetName()) }},
			{tmplInf.Informer(), c.templateChanged},
		}
		for _, h := range handlers {
			fn := func(obj any) {
				if u := asUnstructured(obj); u != nil {
					h.fn(u)
				}
			}
			if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc: fn, DeleteFunc: fn,
				UpdateFunc: func(old, obj any) { fn(old); fn(obj) }, // a Sandbox changes hands
			}); err != nil {
				c.n.log.Debug("kubetest: watch the agent-sandbox extensions", "err", err)
				return
			}
		}
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
		podHandler, err := c.n.factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: c.podChanged, DeleteFunc: c.podChanged, UpdateFunc: func(_, obj any) { c.podChanged(obj) },
		})
		if err != nil {
			c.n.log.Debug("kubetest: watch pods for the agent-sandbox extensions", "err", err)
			return
		}
		defer c.n.factory.Core().V1().Pods().Informer().RemoveEventHandler(podHandler)
		for {
			key, quit := c.queue.Get()
			if quit {
				return
			}
			err := c.sync(ctx, key)
			if err != nil && ctx.Err() == nil {
				c.n.log.Debug("kubetest: sync", "key", key, "err", err)
				c.queue.AddRateLimited(key)
			} else {
				c.queue.Forget(key)
			}
			c.queue.Done(key)
		}
	})
}

// served reports whether the apiserver serves Sandboxes and the three extension resources.
func (c *extController) served() bool {
	if !c.n.sandbox.served() {
		return false
	}
	list, err := c.n.api.Client.Discovery().ServerResourcesForGroupVersion(extGroup + "/" + extVersion)
	if err != nil {
		return false
	}
	for _, res := range []string{templateGVR.Resource, poolGVR.Resource, claimGVR.Resource} {
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == res }) {
			return false
		}
	}
	return true
}

func asUnstructured(obj any) *unstructured.Unstructured {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

func (c *extController) enqueue(kind, ns, name string) { c.queue.Add(kind + "/" + ns + "/" + name) }

// poolChanged queues the pool and the claims waiting on it.
func (c *extController) poolChanged(pool *unstructured.Unstructured) {
	c.enqueue("pool", pool.GetNamespace(), pool.GetName())
	claims, _ := c.claims.ByNamespace(pool.GetNamespace()).List(labels.Everything())
	for _, obj := range claims {
		if u := asUnstructured(obj); u != nil && str(u, "spec", "warmPoolRef", "name") == pool.GetName() && str(u, "status", "sandbox", "name") == "" {
			c.enqueue("claim", u.GetNamespace(), u.GetName())
		}
	}
}

// templateChanged queues the pools made from the template.
func (c *extController) templateChanged(tmpl *unstructured.Unstructured) {
	pools, _ := c.pools.ByNamespace(tmpl.GetNamespace()).List(labels.Everything())
	for _, obj := range pools {
		if u := asUnstructured(obj); u != nil && str(u, "spec", "sandboxTemplateRef", "name") == tmpl.GetName() {
			c.poolChanged(u)
		}
	}
}

// sandboxChanged queues the Sandbox's pool or claim.
func (c *extController) sandboxChanged(sb *unstructured.Unstructured) {
	if pool := sb.GetLabels()[WarmPoolLabel]; pool != "" {
		c.enqueue("pool", sb.GetNamespace(), pool)
	}
	for _, ref := range sb.GetOwnerReferences() {
		if ref.Controller == nil || !*ref.Controller || !strings.HasPrefix(ref.APIVersion, extGroup+"/") {
			continue
		}
		switch ref.Kind {
		case kindPool:
			c.enqueue("pool", sb.GetNamespace(), ref.Name)
		case kindClaim:
			c.enqueue("claim", sb.GetNamespace(), ref.Name)
		}
	}
}

// podChanged queues the pool or claim of the pod's Sandbox (its readiness and metadata count).
func (c *extController) podChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pool := pod.Labels[WarmPoolLabel]; pool != "" {
		c.enqueue("pool", pod.Namespace, pool)
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "Sandbox" || !strings.HasPrefix(ref.APIVersion, sandboxGroup+"/") {
		return
	}
	if sb, err := c.sandboxes.ByNamespace(pod.Namespace).Get(ref.Name); err == nil {
		if u := asUnstructured(sb); u != nil {
			c.sandboxChanged(u)
		}
	}
}

func (c *extController) sync(ctx context.Context, key string) error {
	kind, rest, _ := strings.Cut(key, "/")
	ns, name, _ := strings.Cut(rest, "/")
	extMu.Lock()
	defer extMu.Unlock()
	switch kind {
	case "pool":
		return c.syncPool(ctx, ns, name)
	case "claim":
		return c.syncClaim(ctx, ns, name)
	}
	return nil
}

// ---- SandboxWarmPool ----

func (c *extController) syncPool(ctx context.Context, ns, name string) error {
	pool, err := c.n.api.Dynamic.Resource(poolGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		members, err := c.controlled(ctx, ns, kindPool, name, "", WarmPoolLabel+"="+name)
		if err != nil {
			return err
		}
		return c.deleteAll(ctx, members, metav1.DeletePropagationBackground)
	} else if err != nil {
		return err
	}
	members, err := c.controlled(ctx, ns, kindPool, name, pool.GetUID(), WarmPoolLabel+"="+name)
	if err != nil {
		return err
	}
	if pool.GetDeletionTimestamp() != nil {
		return c.finishDeletion(ctx, pool, poolGVR, members)
	}
	replicas, found, _ := unstructured.NestedInt64(pool.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	alive := slices.DeleteFunc(members, func(sb *unstructured.Unstructured) bool { return sb.GetDeletionTimestamp() != nil })
	switch {
	case int64(len(alive)) < replicas:
		tmplName := str(pool, "spec", "sandboxTemplateRef", "name")
		tmpl, err := c.n.api.Dynamic.Resource(templateGVR).Namespace(ns).Get(ctx, tmplName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c.n.log.Debug("kubetest: warm pool without its template", "pool", ns+"/"+name, "template", tmplName)
			break // the template's event brings us back
		} else if err != nil {
			return err
		}
		for range replicas - int64(len(alive)) {
			sb := sandboxFrom(tmpl, ownerRef(pool, kindPool), map[string]string{WarmPoolLabel: name}, nil)
			sb.SetGenerateName(name + "-")
			created, err := c.n.api.Dynamic.Resource(sandboxGVR).Namespace(ns).Create(ctx, sb, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("create a Sandbox of warm pool %s/%s: %w", ns, name, err)
			}
			alive = append(alive, created)
		}
	case int64(len(alive)) > replicas:
		// Not-ready ones go first, then the newest.
		slices.SortStableFunc(alive, func(a, b *unstructured.Unstructured) int {
			_, ra := c.podOf(a)
			_, rb := c.podOf(b)
			if ra != rb {
				if ra {
					return 1
				}
				return -1
			}
			return b.GetCreationTimestamp().Compare(a.GetCreationTimestamp().Time)
		})
		extra := alive[:int64(len(alive))-replicas]
		if err := c.deleteAll(ctx, extra, metav1.DeletePropagationBackground); err != nil {
			return err
		}
		alive = alive[len(extra):]
	}
	ready := 0
	for _, sb := range alive {
		if _, ok := c.podOf(sb); ok {
			ready++
		}
	}
	status := map[string]any{
		"replicas": int64(len(alive)), "readyReplicas": int64(ready),
		"selector": WarmPoolLabel + "=" + name, "observedGeneration": pool.GetGeneration(),
	}
	return c.writeStatus(ctx, pool, poolGVR, status)
}

// sandboxFrom makes a Sandbox from the template's spec.podTemplate, controlled by owner, with
// lbls on it and in its podTemplate and meta (spec.additionalPodMetadata) in its podTemplate.
func sandboxFrom(tmpl *unstructured.Unstructured, owner metav1.OwnerReference, lbls map[string]string, meta map[string]any) *unstructured.Unstructured {
	podTemplate, _, _ := unstructured.NestedFieldCopy(tmpl.Object, "spec", "podTemplate")
	pt, _ := podTemplate.(map[string]any)
	if pt == nil {
		pt = map[string]any{}
	}
	sb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sandboxGroup + "/" + sandboxVersion, "kind": "Sandbox",
		"metadata": map[string]any{"namespace": tmpl.GetNamespace()},
		"spec":     map[string]any{"podTemplate": pt},
	}}
	if len(lbls) > 0 {
		sb.SetLabels(lbls)
	}
	sb.SetOwnerReferences([]metav1.OwnerReference{owner})
	mergePodMetadata(pt, "labels", toAnyMap(lbls), nil)
	if meta != nil {
		mergePodMetadata(pt, "labels", mapAt(meta, "labels"), nil)
		mergePodMetadata(pt, "annotations", mapAt(meta, "annotations"), nil)
	}
	return sb
}

// ---- SandboxClaim ----

func (c *extController) syncClaim(ctx context.Context, ns, name string) error {
	claim, err := c.n.api.Dynamic.Resource(claimGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		owned, err := c.controlled(ctx, ns, kindClaim, name, "", "")
		if err != nil {
			return err
		}
		return c.deleteAll(ctx, owned, metav1.DeletePropagationBackground)
	} else if err != nil {
		return err
	}
	owned, err := c.controlled(ctx, ns, kindClaim, name, claim.GetUID(), "")
	if err != nil {
		return err
	}
	if claim.GetDeletionTimestamp() != nil {
		return c.finishDeletion(ctx, claim, claimGVR, owned)
	}
	bound := str(claim, "status", "sandbox", "name")
	var sb *unstructured.Unstructured
	for _, o := range owned {
		if sb == nil || o.GetName() == bound {
			sb = o
		}
	}
	meta, _, _ := unstructured.NestedMap(claim.Object, "spec", "additionalPodMetadata")
	reason, message := "", ""
	switch {
	case sb != nil:
	case bound != "":
		reason, message = "SandboxNotFound", "Sandbox "+bound+" does not exist"
	default:
		if sb, err = c.adopt(ctx, claim, meta); err != nil {
			return err
		}
		if sb == nil {
			if sb, reason, message, err = c.coldStart(ctx, claim, meta); err != nil {
				return err
			}
		}
	}
	var pod *corev1.Pod
	ready := false
	if sb != nil {
		// Record the Sandbox first: a failure below must not make the next sync look again.
		if bound != sb.GetName() {
			if err := c.writeClaimStatus(ctx, claim, sb.GetName(), nil, false, "SandboxNotReady", "Pod does not exist yet"); err != nil {
				return err
			}
			if claim, err = c.n.api.Dynamic.Resource(claimGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if err := c.claimSandbox(ctx, sb, claim, meta); err != nil {
			return err
		}
		pod, ready = c.podOf(sb)
		if err := c.patchPod(ctx, pod, meta); err != nil {
			return err
		}
		reason, message = "SandboxNotReady", "Pod does not exist"
		switch {
		case ready:
			reason, message = "SandboxReady", "Sandbox is ready"
		case pod != nil && pod.Status.Phase == corev1.PodRunning:
			message = "Pod is Running but not Ready"
		case pod != nil:
			message = "Pod exists with phase: " + string(pod.Status.Phase)
		}
	}
	sbName := bound
	if sb != nil {
		sbName = sb.GetName()
	}
	return c.writeClaimStatus(ctx, claim, sbName, pod, ready, reason, message)
}

// adopt takes an unclaimed Sandbox of the claim's pool, one with a Ready pod if any, or returns nil.
func (c *extController) adopt(ctx context.Context, claim *unstructured.Unstructured, meta map[string]any) (*unstructured.Unstructured, error) {
	poolName := str(claim, "spec", "warmPoolRef", "name")
	if poolName == "" {
		return nil, nil
	}
	candidates, err := c.controlled(ctx, claim.GetNamespace(), kindPool, poolName, "", WarmPoolLabel+"="+poolName)
	if err != nil {
		return nil, err
	}
	candidates = slices.DeleteFunc(candidates, func(sb *unstructured.Unstructured) bool { return sb.GetDeletionTimestamp() != nil })
	slices.SortStableFunc(candidates, func(a, b *unstructured.Unstructured) int {
		_, ra := c.podOf(a)
		_, rb := c.podOf(b)
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		if t := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); t != 0 {
			return t
		}
		return cmp.Compare(a.GetName(), b.GetName())
	})
	for _, sb := range candidates {
		updated, err := c.update(ctx, sb, func(sb *unstructured.Unstructured) bool {
			// Still unclaimed: labelled, controlled by the pool it was listed with.
			ref := metav1.GetControllerOf(sb)
			return sb.GetDeletionTimestamp() == nil && sb.GetLabels()[WarmPoolLabel] == poolName &&
				ref != nil && ref.Kind == kindPool && ref.Name == poolName
		}, func(sb *unstructured.Unstructured) { claimedSpec(sb, claim, meta) })
		if err != nil {
			return nil, fmt.Errorf("adopt Sandbox %s/%s: %w", sb.GetNamespace(), sb.GetName(), err)
		}
		if updated != nil {
			return updated, nil
		}
	}
	return nil, nil
}

// update applies mut to sb and updates it, guarded by its resourceVersion. On a conflict (the
// Sandbox controller writes status too) it reads the Sandbox again and tries again while ok
// says it is still what it was taken for. It returns nil, nil when the Sandbox is gone or no
// longer ok.
func (c *extController) update(ctx context.Context, sb *unstructured.Unstructured, ok func(*unstructured.Unstructured) bool, mut func(*unstructured.Unstructured)) (*unstructured.Unstructured, error) {
	res := c.n.api.Dynamic.Resource(sandboxGVR).Namespace(sb.GetNamespace())
	for range 10 {
		sb = sb.DeepCopy()
		mut(sb)
		updated, err := res.Update(ctx, sb, metav1.UpdateOptions{})
		switch {
		case err == nil:
			return updated, nil
		case apierrors.IsNotFound(err):
			return nil, nil
		case !apierrors.IsConflict(err):
			return nil, err
		}
		if sb, err = res.Get(ctx, sb.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		if !ok(sb) {
			return nil, nil
		}
	}
	return nil, errors.New("conflicts on every try")
}

// coldStart creates a Sandbox named like the claim from its pool's template, or says why not.
func (c *extController) coldStart(ctx context.Context, claim *unstructured.Unstructured, meta map[string]any) (_ *unstructured.Unstructured, reason, message string, _ error) {
	ns := claim.GetNamespace()
	poolName := str(claim, "spec", "warmPoolRef", "name")
	pool, err := c.n.api.Dynamic.Resource(poolGVR).Namespace(ns).Get(ctx, poolName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "WarmPoolNotFound", "SandboxWarmPool " + poolName + " does not exist", nil
	} else if err != nil {
		return nil, "", "", err
	}
	tmplName := str(pool, "spec", "sandboxTemplateRef", "name")
	tmpl, err := c.n.api.Dynamic.Resource(templateGVR).Namespace(ns).Get(ctx, tmplName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "TemplateNotFound", "SandboxTemplate " + tmplName + " does not exist", nil
	} else if err != nil {
		return nil, "", "", err
	}
	sb := sandboxFrom(tmpl, ownerRef(claim, kindClaim), nil, meta)
	sb.SetName(claim.GetName())
	sandboxes := c.n.api.Dynamic.Resource(sandboxGVR).Namespace(ns)
	created, err := sandboxes.Create(ctx, sb, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, err := sandboxes.Get(ctx, sb.GetName(), metav1.GetOptions{})
		if err != nil {
			return nil, "", "", err // deleted meanwhile: retried
		}
		if ref := metav1.GetControllerOf(existing); ref != nil && ref.UID == claim.GetUID() {
			return existing, "", "", nil
		}
		if existing.GetDeletionTimestamp() != nil {
			return nil, "", "", fmt.Errorf("the Sandbox %s/%s is still being deleted", ns, sb.GetName())
		}
		return nil, "SandboxNameConflict", "Sandbox " + sb.GetName() + " exists and is not this claim's", nil
	} else if err != nil {
		return nil, "", "", fmt.Errorf("create Sandbox %s/%s: %w", ns, sb.GetName(), err)
	}
	return created, "", "", nil
}

// claimedSpec makes sb the claim's: the claim controls it instead of the pool, WarmPoolLabel is
// off it and its podTemplate, and meta is in its podTemplate. It reports whether sb changed.
func claimedSpec(sb, claim *unstructured.Unstructured, meta map[string]any) bool {
	changed := false
	if lbls := sb.GetLabels(); lbls[WarmPoolLabel] != "" {
		delete(lbls, WarmPoolLabel)
		sb.SetLabels(lbls)
		changed = true
	}
	refs := slices.DeleteFunc(sb.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
		return r.Kind == kindPool && strings.HasPrefix(r.APIVersion, extGroup+"/")
	})
	if !slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == claim.GetUID() }) {
		refs = append(refs, ownerRef(claim, kindClaim))
	}
	if len(refs) != len(sb.GetOwnerReferences()) || !slices.EqualFunc(refs, sb.GetOwnerReferences(), func(a, b metav1.OwnerReference) bool { return a.UID == b.UID }) {
		sb.SetOwnerReferences(refs)
		changed = true
	}
	pt, _, _ := unstructured.NestedMap(sb.Object, "spec", "podTemplate")
	if pt == nil {
		pt = map[string]any{}
	}
	ptChanged := mergePodMetadata(pt, "labels", mapAt(meta, "labels"), []string{WarmPoolLabel})
	ptChanged = mergePodMetadata(pt, "annotations", mapAt(meta, "annotations"), nil) || ptChanged
	if ptChanged {
		unstructured.SetNestedMap(sb.Object, pt, "spec", "podTemplate")
		changed = true
	}
	return changed
}

// claimSandbox keeps the claimed Sandbox in claimedSpec's shape (additionalPodMetadata may change).
func (c *extController) claimSandbox(ctx context.Context, sb, claim *unstructured.Unstructured, meta map[string]any) error {
	if !claimedSpec(sb.DeepCopy(), claim, meta) {
		return nil
	}
	updated, err := c.update(ctx, sb, func(sb *unstructured.Unstructured) bool {
		ref := metav1.GetControllerOf(sb)
		return ref != nil && ref.UID == claim.GetUID()
	}, func(sb *unstructured.Unstructured) { claimedSpec(sb, claim, meta) })
	if err != nil {
		return fmt.Errorf("update claimed Sandbox %s/%s: %w", sb.GetNamespace(), sb.GetName(), err)
	}
	if updated == nil {
		return fmt.Errorf("claimed Sandbox %s/%s went or changed hands", sb.GetNamespace(), sb.GetName()) // retried
	}
	*sb = *updated
	return nil
}

// patchPod merges meta into the pod's labels and annotations and takes WarmPoolLabel off it.
func (c *extController) patchPod(ctx context.Context, pod *corev1.Pod, meta map[string]any) error {
	if pod == nil || pod.DeletionTimestamp != nil {
		return nil
	}
	lbls, anns := map[string]any{}, map[string]any{}
	for k, v := range mapAt(meta, "labels") {
		if pod.Labels[k] != v {
			lbls[k] = v
		}
	}
	if _, ok := pod.Labels[WarmPoolLabel]; ok {
		lbls[WarmPoolLabel] = nil
	}
	for k, v := range mapAt(meta, "annotations") {
		if pod.Annotations[k] != v {
			anns[k] = v
		}
	}
	if len(lbls) == 0 && len(anns) == 0 {
		return nil
	}
	md := map[string]any{"uid": string(pod.UID)} // the pod it was, not a new one of the name
	if len(lbls) > 0 {
		md["labels"] = lbls
	}
	if len(anns) > 0 {
		md["annotations"] = anns
	}
	patch, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return err
	}
	_, err = c.n.api.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone or replaced: the new pod has the Sandbox's podTemplate, or its event brings us back
	}
	return err
}

func (c *extController) writeClaimStatus(ctx context.Context, claim *unstructured.Unstructured, sbName string, pod *corev1.Pod, ready bool, reason, message string) error {
	status := map[string]any{}
	if sbName != "" {
		s := map[string]any{"name": sbName}
		if pod != nil && len(pod.Status.PodIPs) > 0 {
			ips := make([]any, 0, len(pod.Status.PodIPs))
			for _, ip := range pod.Status.PodIPs {
				ips = append(ips, ip.IP)
			}
			s["podIPs"] = ips
		}
		status["sandbox"] = s
	}
	cond := map[string]any{
		"type": "Ready", "status": "False", "reason": reason, "message": message,
		"observedGeneration": claim.GetGeneration(),
	}
	if ready {
		cond["status"] = "True"
	}
	cond["lastTransitionTime"] = metav1.Now().UTC().Format(time.RFC3339)
	old, _, _ := unstructured.NestedMap(claim.Object, "status")
	var conds []any
	if prev, ok := old["conditions"].([]any); ok {
		for _, o := range prev {
			m, ok := o.(map[string]any)
			if !ok {
				continue
			}
			if m["type"] != "Ready" {
				conds = append(conds, m)
			} else if m["status"] == cond["status"] {
				cond["lastTransitionTime"] = m["lastTransitionTime"]
			}
		}
	}
	status["conditions"] = append(conds, cond)
	return c.writeStatus(ctx, claim, claimGVR, status)
}

// ---- shared ----

// controlled lists the live Sandboxes of ns matching selector whose controller is the kind
// (SandboxWarmPool or SandboxClaim) named name, with uid unless uid is "".
func (c *extController) controlled(ctx context.Context, ns, kind, name string, uid types.UID, selector string) ([]*unstructured.Unstructured, error) {
	list, err := c.n.api.Dynamic.Resource(sandboxGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list Sandboxes in %s: %w", ns, err)
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		sb := &list.Items[i]
		ref := metav1.GetControllerOf(sb)
		if ref != nil && ref.Kind == kind && ref.Name == name && strings.HasPrefix(ref.APIVersion, extGroup+"/") && (uid == "" || ref.UID == uid) {
			out = append(out, sb)
		}
	}
	return out, nil
}

// deleteAll deletes the Sandboxes, each guarded by its uid and resourceVersion and, on a
// conflict, read again and deleted only while the same owner still controls it (one a claim
// adopted meanwhile stays).
func (c *extController) deleteAll(ctx context.Context, sbs []*unstructured.Unstructured, propagation metav1.DeletionPropagation) error {
	res := func(sb *unstructured.Unstructured) dynamic.ResourceInterface {
		return c.n.api.Dynamic.Resource(sandboxGVR).Namespace(sb.GetNamespace())
	}
	for _, sb := range sbs {
		owner := metav1.GetControllerOf(sb)
		for try := 0; ; try++ {
			if sb.GetDeletionTimestamp() != nil {
				break
			}
			uid, rv := sb.GetUID(), sb.GetResourceVersion()
			err := res(sb).Delete(ctx, sb.GetName(), metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}, PropagationPolicy: &propagation,
			})
			if err == nil || apierrors.IsNotFound(err) {
				break
			} else if !apierrors.IsConflict(err) || try == 10 {
				return fmt.Errorf("delete Sandbox %s/%s: %w", sb.GetNamespace(), sb.GetName(), err)
			}
			fresh, err := res(sb).Get(ctx, sb.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			} else if err != nil {
				return err
			}
			if ref := metav1.GetControllerOf(fresh); fresh.GetUID() != uid || ref == nil || owner == nil || ref.UID != owner.UID {
				break
			}
			sb = fresh
		}
	}
	return nil
}

// finishDeletion does the garbage collector's part of deleting a pool or claim: its Sandboxes
// go (foreground: it waits for them) or lose their owner reference (orphan), then the
// finalizers come off.
func (c *extController) finishDeletion(ctx context.Context, owner *unstructured.Unstructured, gvr schema.GroupVersionResource, owned []*unstructured.Unstructured) error {
	fins := owner.GetFinalizers()
	orphan := slices.Contains(fins, metav1.FinalizerOrphanDependents)
	foreground := slices.Contains(fins, metav1.FinalizerDeleteDependents)
	switch {
	case orphan:
		for _, sb := range owned {
			sb = sb.DeepCopy()
			sb.SetOwnerReferences(slices.DeleteFunc(sb.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == owner.GetUID() }))
			if _, err := c.n.api.Dynamic.Resource(sandboxGVR).Namespace(sb.GetNamespace()).Update(ctx, sb, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	case foreground:
		if len(owned) > 0 {
			if err := c.deleteAll(ctx, owned, metav1.DeletePropagationForeground); err != nil {
				return err
			}
			return errors.New("waiting for the Sandboxes to go") // retried
		}
	default:
		return c.deleteAll(ctx, owned, metav1.DeletePropagationBackground)
	}
	owner = owner.DeepCopy()
	owner.SetFinalizers(slices.DeleteFunc(fins, func(f string) bool {
		return f == metav1.FinalizerDeleteDependents || f == metav1.FinalizerOrphanDependents
	}))
	_, err := c.n.api.Dynamic.Resource(gvr).Namespace(owner.GetNamespace()).Update(ctx, owner, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// podOf returns the Sandbox's pod (from the node's cache) and whether it is Running and Ready.
func (c *extController) podOf(sb *unstructured.Unstructured) (*corev1.Pod, bool) {
	pod, err := c.n.pods.Pods(sb.GetNamespace()).Get(sb.GetName())
	if err != nil {
		return nil, false
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != sb.GetUID() {
		return nil, false
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return pod, false
	}
	cond := findCondition(pod.Status.Conditions, corev1.PodReady)
	return pod, cond != nil && cond.Status == corev1.ConditionTrue
}

func (c *extController) writeStatus(ctx context.Context, obj *unstructured.Unstructured, gvr schema.GroupVersionResource, status map[string]any) error {
	old, _, _ := unstructured.NestedMap(obj.Object, "status")
	if jsonEqual(old, status) {
		return nil
	}
	obj = obj.DeepCopy()
	obj.Object["status"] = status
	_, err := c.n.api.Dynamic.Resource(gvr).Namespace(obj.GetNamespace()).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func ownerRef(owner *unstructured.Unstructured, kind string) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: extGroup + "/" + extVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(),
		Controller: ptr(true), BlockOwnerDeletion: ptr(true),
	}
}

// mergePodMetadata sets add's entries in podTemplate.metadata[field] and deletes the keys in
// remove, and reports whether that changed anything.
func mergePodMetadata(podTemplate map[string]any, field string, add map[string]any, remove []string) bool {
	md, _ := podTemplate["metadata"].(map[string]any)
	m, _ := md[field].(map[string]any)
	changed := false
	for _, k := range remove {
		if _, ok := m[k]; ok {
			delete(m, k)
			changed = true
		}
	}
	for k, v := range add {
		if m[k] != v {
			if m == nil {
				m = map[string]any{}
			}
			m[k] = v
			changed = true
		}
	}
	if changed {
		if md == nil {
			md = map[string]any{}
			podTemplate["metadata"] = md
		}
		md[field] = m
	}
	return changed
}

// mapAt returns meta[field] as a map of strings (labels or annotations).
func mapAt(meta map[string]any, field string) map[string]any {
	m, _ := meta[field].(map[string]any)
	out := make(map[string]any, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func toAnyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func str(u *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}
