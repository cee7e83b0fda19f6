package kubetest

// The scheduler and the kubelet: one work queue of pod keys (namespace/name) fed by a pod
// informer, container exits and deadlines. Containers are keyed by pod UID, so a pod deleted
// and created again under the same name gets a new container.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// podState is what the kubelet knows of one pod (by UID).
type podState struct {
	ns, name    string
	uid         types.UID
	container   string // the Kubernetes container run (the first)
	containerID string // its docker container ("" when it could not be created)
	image       string
	imageID     string
	ip          string
	started     metav1.Time
	waiting     *corev1.ContainerStateWaiting // why there is no container yet
	attempts    int                           // failed creations, for the back-off
	killed      bool                          // KillPod removed the container
	deadline    bool                          // activeDeadlineSeconds ran out; the container was killed
	gone        bool                          // the pod was deleted; the container removed
}

// podEvent queues the pod, and its Sandbox when it has one.
func (n *Node) podEvent(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n.queue.Add(pod.Namespace + "/" + pod.Name)
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "Sandbox" && strings.HasPrefix(ref.APIVersion, sandboxGroup+"/") {
		n.sandbox.queue.Add(pod.Namespace + "/" + ref.Name)
	}
}

func (n *Node) processNext(ctx context.Context) bool {
	key, quit := n.queue.Get()
	if quit {
		return false
	}
	defer n.queue.Done(key)
	ns, name, _ := strings.Cut(key, "/")
	retry, err := n.sync(ctx, ns, name)
	switch {
	case err != nil && ctx.Err() == nil:
		n.log.Debug("kubetest: sync pod", "pod", key, "err", err)
		n.queue.AddRateLimited(key)
	case retry > 0:
		n.queue.Forget(key)
		n.queue.AddAfter(key, retry)
	default:
		n.queue.Forget(key)
	}
	return true
}

// sync brings pod ns/name one step closer to what its spec says; it returns when to look again.
func (n *Node) sync(ctx context.Context, ns, name string) (time.Duration, error) {
	pod, err := n.pods.Pods(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	n.forgetOthers(ctx, ns, name, pod)
	if pod == nil {
		return 0, nil
	}
	if pod.DeletionTimestamp != nil {
		if pod.Spec.NodeName != "" && !n.owns(pod.Spec.NodeName) {
			return 0, nil
		}
		return 0, n.finishDeletion(ctx, pod)
	}
	if pod.Spec.NodeName == "" {
		return n.schedule(ctx, pod)
	}
	if !n.owns(pod.Spec.NodeName) {
		return 0, nil
	}
	return n.run(ctx, pod)
}

// owns reports whether node is one of n's Node objects.
func (n *Node) owns(node string) bool {
	for _, name := range n.names {
		if name == node {
			return true
		}
	}
	return false
}

// forgetOthers removes the containers of earlier pods named ns/name (other UIDs, or all of
// them when the pod is gone).
func (n *Node) forgetOthers(ctx context.Context, ns, name string, pod *corev1.Pod) {
	n.mu.Lock()
	var stale []*podState
	for uid, st := range n.byUID {
		if st.ns == ns && st.name == name && (pod == nil || pod.UID != uid) {
			stale = append(stale, st)
			delete(n.byUID, uid)
			st.gone = true
		}
	}
	n.mu.Unlock()
	for _, st := range stale {
		n.removeContainer(ctx, st)
	}
}

func (n *Node) removeContainer(ctx context.Context, st *podState) {
	n.mu.Lock()
	id := st.containerID
	n.mu.Unlock()
	if id == "" {
		return
	}
	if _, err := n.docker.ContainerRemove(context.WithoutCancel(ctx), id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		n.log.Debug("kubetest: remove container", "pod", st.ns+"/"+st.name, "container", id, "err", err)
	}
}

// finishDeletion does what the kubelet does for a pod being deleted: it stops the containers
// (at once: the grace period is not waited for) and deletes the pod for good.
func (n *Node) finishDeletion(ctx context.Context, pod *corev1.Pod) error {
	n.mu.Lock()
	st := n.byUID[pod.UID]
	if st != nil {
		st.gone = true
	}
	n.mu.Unlock()
	if st != nil {
		n.removeContainer(ctx, st)
	}
	zero := int64(0)
	err := n.api.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	n.mu.Lock()
	delete(n.byUID, pod.UID)
	n.mu.Unlock()
	return nil
}

// schedule binds a pending pod to one of the fake nodes that fit it (round robin), or marks it
// Unschedulable with a message like the scheduler's.
func (n *Node) schedule(ctx context.Context, pod *corev1.Pod) (time.Duration, error) {
	if pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
		return 0, nil
	}
	nodes, err := n.api.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	var fit []string
	reasons := map[string]int{}
	total := 0
	for i := range nodes.Items {
		node := &nodes.Items[i]
		if !n.owns(node.Name) {
			continue
		}
		total++
		if why := unfit(pod, node); why != "" {
			reasons[why]++
			continue
		}
		fit = append(fit, node.Name)
	}
	if len(fit) == 0 {
		return 5 * time.Second, n.unschedulable(ctx, pod, total, reasons)
	}
	sort.Strings(fit)
	n.mu.Lock()
	target := fit[n.next%len(fit)]
	n.next++
	n.mu.Unlock()
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: target},
	}
	err = n.api.Client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return 0, nil // bound by another fake node, or gone
	}
	return 0, err
}

// unfit says why node cannot take pod, in the scheduler's words, or "".
func unfit(pod *corev1.Pod, node *corev1.Node) string {
	if node.Spec.Unschedulable {
		return "node(s) were unschedulable"
	}
	if !labels.SelectorFromSet(pod.Spec.NodeSelector).Matches(labels.Set(node.Labels)) {
		return "node(s) didn't match Pod's node affinity/selector"
	}
	for i := range node.Spec.Taints {
		taint := &node.Spec.Taints[i]
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated := false
		for j := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[j].ToleratesTaint(klog.Background(), taint, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)
		}
	}
	return ""
}

func (n *Node) unschedulable(ctx context.Context, pod *corev1.Pod, total int, reasons map[string]int) error {
	var parts []string
	for why, count := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", count, why))
	}
	sort.Strings(parts)
	msg := fmt.Sprintf("0/%d nodes are available: %s. preemption: 0/%d nodes are available: %d Preemption is not helpful for scheduling.",
		total, strings.Join(parts, ", "), total, total)
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}
	if old := findCondition(pod.Status.Conditions, corev1.PodScheduled); old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		return nil
	}
	pod = pod.DeepCopy()
	pod.Status.Phase = corev1.PodPending
	setCondition(&pod.Status.Conditions, cond)
	_, err := n.api.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// run creates and starts the pod's container if it has none, then writes its status.
func (n *Node) run(ctx context.Context, pod *corev1.Pod) (time.Duration, error) {
	n.mu.Lock()
	st := n.byUID[pod.UID]
	if st == nil {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			n.mu.Unlock()
			return 0, nil // finished before this node started
		}
		st = &podState{ns: pod.Namespace, name: pod.Name, uid: pod.UID}
		if len(pod.Spec.Containers) > 0 {
			st.container = pod.Spec.Containers[0].Name
		}
		n.byUID[pod.UID] = st
	}
	needStart := st.containerID == "" && !st.killed
	n.mu.Unlock()

	var retry time.Duration
	if needStart && len(pod.Spec.Containers) > 0 && pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
		retry = n.start(ctx, pod, st)
	}
	status, deadline := n.status(ctx, pod, st)
	if deadline {
		n.mu.Lock()
		id := st.containerID
		n.mu.Unlock()
		if id != "" {
			n.docker.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
		}
		status, _ = n.status(ctx, pod, st)
	}
	if err := n.writeStatus(ctx, pod, status); err != nil {
		return 0, err
	}
	if status.Phase == corev1.PodRunning && pod.Spec.ActiveDeadlineSeconds != nil && status.StartTime != nil {
		left := time.Until(status.StartTime.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second))
		if retry == 0 || left < retry {
			retry = max(left, time.Millisecond)
		}
	}
	return retry, nil
}

// start creates and starts the container; on failure it records why (ErrImagePull,
// CreateContainerError, ...) and returns when to try again.
func (n *Node) start(ctx context.Context, pod *corev1.Pod, st *podState) time.Duration {
	c := &pod.Spec.Containers[0]
	fail := func(reason, msg string) time.Duration {
		n.mu.Lock()
		defer n.mu.Unlock()
		st.attempts++
		if reason == "ErrImagePull" && st.attempts > 1 {
			reason, msg = "ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q", c.Image)
		}
		st.waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
		return min(time.Duration(st.attempts)*time.Second, 10*time.Second)
	}
	img, err := n.docker.ImageInspect(ctx, c.Image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return fail("ErrImagePull", fmt.Sprintf("failed to pull and unpack image %q: %s: not found (kubetest never pulls: import it into the engine first)", c.Image, c.Image))
		}
		return fail("ErrImagePull", fmt.Sprintf("inspect image %q: %v", c.Image, err))
	}
	spec, err := n.containerSpec(ctx, pod, c, img.InspectResponse)
	if err != nil {
		var cfgErr *configError
		if errors.As(err, &cfgErr) {
			return fail("CreateContainerConfigError", cfgErr.msg)
		}
		return fail("CreateContainerConfigError", err.Error())
	}
	created, err := n.docker.ContainerCreate(ctx, client.ContainerCreateOptions{Config: spec.config, HostConfig: spec.host, Name: spec.name})
	if err != nil {
		return fail("CreateContainerError", err.Error())
	}
	if _, err := n.docker.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		n.docker.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		return fail("RunContainerError", err.Error())
	}
	ins, err := n.docker.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	ip := "127.0.0.1"
	started := metav1.NewTime(time.Now().Truncate(time.Second))
	if err == nil {
		for _, net := range ins.Container.NetworkSettings.Networks {
			if net != nil && net.IPAddress.IsValid() {
				ip = net.IPAddress.String()
			}
		}
		if t, perr := time.Parse(time.RFC3339Nano, ins.Container.State.StartedAt); perr == nil {
			started = metav1.NewTime(t.Truncate(time.Second))
		}
	}
	n.mu.Lock()
	st.containerID, st.ip, st.started, st.waiting = created.ID, ip, started, nil
	st.image, st.imageID = c.Image, img.ID
	gone := st.gone
	n.mu.Unlock()
	if gone { // deleted while starting
		n.removeContainer(ctx, st)
		return 0
	}
	key := pod.Namespace + "/" + pod.Name
	id := created.ID
	n.wg.Go(func() {
		wait := n.docker.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case <-wait.Result:
		case <-wait.Error:
		case <-ctx.Done():
			return
		}
		n.queue.Add(key)
	})
	return 0
}

// writeStatus writes status unless the pod already has it.
func (n *Node) writeStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	if statusEqual(pod.Status, status) {
		return nil
	}
	pod = pod.DeepCopy()
	pod.Status = status
	_, err := n.api.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// findCondition returns the condition of type typ, or nil.
func findCondition(conds []corev1.PodCondition, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// setCondition sets cond, keeping the transition time when its status is unchanged.
func setCondition(conds *[]corev1.PodCondition, cond corev1.PodCondition) {
	now := metav1.Now()
	if old := findCondition(*conds, cond.Type); old != nil {
		if old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		} else {
			cond.LastTransitionTime = now
		}
		cond.LastProbeTime = old.LastProbeTime
		*old = cond
		return
	}
	cond.LastTransitionTime = now
	*conds = append(*conds, cond)
}
