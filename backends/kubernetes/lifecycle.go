package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// ensure returns the session's running pod, making one when there is none (or the one there
// is has ended). recreated says a pod this session had (known, or marked by the session's
// saved state on this machine) is gone, so the environment starts afresh.
func (b *Backend) ensure(ctx context.Context, session string, known types.UID) (*corev1.Pod, bool, error) {
	c, err := b.cluster()
	if err != nil {
		return nil, false, err
	}
	pod, err := b.findPod(ctx, c, session)
	if err != nil {
		return nil, false, err
	}
	recreated := false
	if pod != nil && ended(pod) {
		b.log.Info("the session's pod has ended; making a new one", "session", session, "pod", pod.Name, "phase", pod.Status.Phase, "reason", pod.Status.Reason)
		if err := b.deleteNow(ctx, c, pod); err != nil {
			return nil, false, err
		}
		pod, recreated = nil, true
	}
	if pod == nil {
		if known != "" {
			recreated = true
		}
		if pod, err = b.create(ctx, c, session); err != nil {
			return nil, false, err
		}
	} else if known != "" && pod.UID != known {
		recreated = true // someone else made it anew meanwhile
	}
	pod, err = b.waitRunning(ctx, c, pod)
	if err != nil {
		return nil, false, err
	}
	return pod, recreated, nil
}

// ended says the pod will never run commands again (restartPolicy Never).
func ended(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// findPod returns the session's pod, or nil.
func (b *Backend) findPod(ctx context.Context, c *conn, session string) (*corev1.Pod, error) {
	sel := labels.SelectorFromSet(labels.Set{labelScope: b.scope.ID(), labelSession: b.sessionHash(session)}).String()
	list, err := c.api.pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, b.mapErr("find pod", session, err)
	}
	var best *corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if best == nil || (ended(best) && !ended(p)) {
			best = p
		}
	}
	return best, nil
}

// create makes the session's pod: a warm one from the pool when there is one, else a new
// one (or, in agent-sandbox mode, a Sandbox whose controller makes it).
func (b *Backend) create(ctx context.Context, c *conn, session string) (*corev1.Pod, error) {
	if err := b.checkRuntimeClass(ctx, c); err != nil {
		return nil, err
	}
	if b.denyEgress() {
		if err := b.ensurePolicy(ctx, c); err != nil {
			return nil, err
		}
	}
	if b.cfg.Mode == config.KubernetesModeAgentSandbox {
		if b.cfg.PoolSize > 0 {
			return b.createClaim(ctx, c, session)
		}
		return b.createSandbox(ctx, c, session)
	}
	if b.cfg.PoolSize > 0 {
		pod, err := b.claim(ctx, c, session)
		if err != nil || pod != nil {
			return pod, err
		}
	}
	name := b.podName(session)
	pod, err := c.api.pods(c.namespace).Create(ctx, b.Pod(session, name), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Another process made it (or an ended one is still terminating): use what is there.
		existing, gerr := c.api.pods(c.namespace).Get(ctx, name, metav1.GetOptions{})
		if gerr == nil && !ended(existing) {
			return existing, nil
		}
		if gerr == nil {
			if err := b.deleteNow(ctx, c, existing); err != nil {
				return nil, err
			}
			pod, err = c.api.pods(c.namespace).Create(ctx, b.Pod(session, name), metav1.CreateOptions{})
		}
	}
	if err != nil {
		return nil, b.admissionErr("create pod", session, err)
	}
	b.log.Debug("created pod", "session", session, "pod", name)
	if b.cfg.PoolSize > 0 {
		b.refill(ctx, c)
	}
	return pod, nil
}

// createSandbox creates an agents.x-k8s.io Sandbox and waits for its controller's pod.
func (b *Backend) createSandbox(ctx context.Context, c *conn, session string) (*corev1.Pod, error) {
	name := b.podName(session)
	obj, err := b.SandboxObject(session, name)
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "sandbox object", ID: session, Err: err}
	}
	_, err = c.dynamic.Resource(sandboxGVR).Namespace(c.namespace).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.IsNotFound(err) { // the server has no such resource
			return nil, &sandbox.Error{Backend: Name, Op: "create sandbox", ID: session,
				Err: fmt.Errorf("kubernetes.mode is agent-sandbox but the cluster has no agents.x-k8s.io Sandbox API; "+
					"install agent-sandbox (github.com/kubernetes-sigs/agent-sandbox) or set kubernetes.mode "+
					"pod: %w", sandbox.ErrInvalidConfig)}
		}
		return nil, b.admissionErr("create sandbox", session, err)
	}
	// The controller makes the pod; wait for it to appear.
	deadline := time.Now().Add(b.cfg.StartTimeout)
	rep := b.waitReporter(ctx, "the pod of Sandbox "+name)
	for delay := 50 * time.Millisecond; ; delay = min(delay*2, time.Second) {
		rep.Tick(func() string { return "the agent-sandbox controller has not made it yet" })
		pod, err := c.api.pods(c.namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return pod, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, b.mapErr("get pod", session, err)
		}
		if time.Now().After(deadline) {
			return nil, &sandbox.Error{Backend: Name, Op: "create sandbox", ID: session,
				Err: fmt.Errorf("the Sandbox %s has no pod after %s: is the agent-sandbox controller running? (kubectl describe sandbox %s): %w", name, b.cfg.StartTimeout, name, sandbox.ErrTimeout)}
		}
		if err := sandbox.Sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

// waitRunning polls the pod until it runs, explaining why it does not.
func (b *Backend) waitRunning(ctx context.Context, c *conn, pod *corev1.Pod) (*corev1.Pod, error) {
	session := pod.Annotations[annoSession]
	deadline := time.Now().Add(b.cfg.StartTimeout)
	rep := b.waitReporter(ctx, "pod "+pod.Name)
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 500*time.Millisecond) {
		rep.Tick(func() string { return podProblem(pod) })
		if pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil && containerRunning(pod) {
			return pod, nil
		}
		if ended(pod) {
			return nil, &sandbox.Error{Backend: Name, Op: "start pod", ID: session,
				Err: fmt.Errorf("pod %s ended while starting: %s: %w", pod.Name, podProblem(pod), sandbox.ErrUnavailable)}
		}
		if why := hopeless(pod); why != "" {
			return nil, &sandbox.Error{Backend: Name, Op: "start pod", ID: session, Err: fmt.Errorf("pod %s cannot start: %s: %w", pod.Name, why, sandbox.ErrInvalidConfig)}
		}
		if time.Now().After(deadline) {
			return nil, &sandbox.Error{Backend: Name, Op: "start pod", ID: session,
				Err: fmt.Errorf("pod %s is not running after %s (kubernetes.start_timeout): %s: %w", pod.Name, b.cfg.StartTimeout, podProblem(pod), sandbox.ErrTimeout)}
		}
		if err := sandbox.Sleep(ctx, delay); err != nil {
			return nil, err
		}
		p, err := c.api.pods(c.namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, &sandbox.Error{Backend: Name, Op: "start pod", ID: session, Err: fmt.Errorf("pod %s was deleted while starting: %w", pod.Name, sandbox.ErrUnavailable)}
		}
		if err != nil {
			return nil, b.mapErr("get pod", session, err)
		}
		pod = p
	}
}

func containerRunning(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == containerName {
			return cs.State.Running != nil
		}
	}
	return false
}

// hopeless names a waiting reason that will not go away by waiting.
func hopeless(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				return fmt.Sprintf("image %s: %s: %s (check kubernetes.image and that the nodes can pull it)", cs.Image, w.Reason, w.Message)
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return w.Reason + ": " + w.Message
			}
		}
	}
	return ""
}

// podProblem says, from the pod's status, where it is stuck.
func podProblem(p *corev1.Pod) string {
	var parts []string
	parts = append(parts, "phase "+string(p.Status.Phase))
	if p.Status.Reason != "" {
		parts = append(parts, p.Status.Reason+": "+p.Status.Message)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
			parts = append(parts, "not scheduled ("+cond.Reason+"): "+cond.Message)
		}
	}
	if p.Spec.NodeName == "" && len(p.Status.Conditions) == 0 {
		parts = append(parts, "no scheduler has placed it yet")
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, "container "+w.Reason+": "+w.Message)
		}
		if t := cs.State.Terminated; t != nil {
			parts = append(parts, fmt.Sprintf("container exited %d (%s) %s", t.ExitCode, t.Reason, strings.TrimSpace(t.Message)))
		}
	}
	return strings.Join(parts, "; ")
}

// deleteNow deletes a pod at once (grace 0) and waits until it is gone, so a new one can
// take its name.
func (b *Backend) deleteNow(ctx context.Context, c *conn, pod *corev1.Pod) error {
	zero := int64(0)
	uid := pod.UID
	err := c.api.pods(c.namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return b.mapErr("delete pod", pod.Name, err)
	}
	deadline := time.Now().Add(time.Minute)
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 500*time.Millisecond) {
		p, err := c.api.pods(c.namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != uid) {
			return nil
		}
		if err != nil {
			return b.mapErr("get pod", pod.Name, err)
		}
		if time.Now().After(deadline) {
			return &sandbox.Error{Backend: Name, Op: "delete pod", ID: pod.Name, Err: fmt.Errorf("still terminating after a minute: %w", sandbox.ErrTimeout)}
		}
		if err := sandbox.Sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// checkRuntimeClass makes sure kubernetes.runtime_class names a RuntimeClass the cluster has.
func (b *Backend) checkRuntimeClass(ctx context.Context, c *conn) error {
	if b.cfg.RuntimeClass == "" {
		return nil
	}
	b.mu.Lock()
	done := b.rcChecked
	b.mu.Unlock()
	if done {
		return nil
	}
	_, err := c.api.runtimeClasses().Get(ctx, b.cfg.RuntimeClass, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		var names []string
		if list, lerr := c.api.runtimeClasses().List(ctx, metav1.ListOptions{}); lerr == nil {
			for _, rc := range list.Items {
				names = append(names, rc.Name)
			}
		}
		slices.Sort(names)
		have := "none"
		if len(names) > 0 {
			have = strings.Join(names, ", ")
		}
		return &sandbox.Error{Backend: Name, Op: "runtime class", ID: b.cfg.RuntimeClass,
			Err: fmt.Errorf("kubernetes.runtime_class %q: the cluster has no such RuntimeClass (it has: %s); install "+
				"it (e.g. gVisor's runsc handler) or unset kubernetes.runtime_class: %w", b.cfg.RuntimeClass, have, sandbox.ErrInvalidConfig)}
	}
	if err != nil && !apierrors.IsForbidden(err) { // without read access, the pod's admission will say
		return b.mapErr("runtime class", b.cfg.RuntimeClass, err)
	}
	b.mu.Lock()
	b.rcChecked = true
	b.mu.Unlock()
	return nil
}

// ensurePolicy creates the scope's deny-all-egress NetworkPolicy if it is missing.
func (b *Backend) ensurePolicy(ctx context.Context, c *conn) error {
	_, err := c.api.networkPolicies(c.namespace).Create(ctx, b.NetworkPolicy(), metav1.CreateOptions{})
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return &sandbox.Error{Backend: Name, Op: "network policy", ID: b.policyName(),
			Err: fmt.Errorf("cannot create the deny-all egress NetworkPolicy (%s); grant create on networkpolicies in "+
				"namespace %s, or set kubernetes.network open to run without it: %w", apiMessage(err), c.namespace, sandbox.ErrDenied)}
	}
	return b.admissionErr("network policy", b.policyName(), err)
}

// touch records the session's last use on its pod, at most once a minute (gc reads it).
func (b *Backend) touch(ctx context.Context, pod string) {
	c, err := b.cluster()
	if err != nil {
		return
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, annoUsed, time.Now().UTC().Format(time.RFC3339))
	_, err = c.api.pods(c.namespace).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !errors.Is(err, context.Canceled) {
		b.log.Debug("could not mark the pod used", "pod", pod, "err", err)
	}
}

// waitReporter says every few seconds, on the caller's progress writer, what a start waits for
// and why (an unschedulable pod, an image pull), so kubernetes.start_timeout never passes in
// silence.
func (b *Backend) waitReporter(ctx context.Context, what string) *sandbox.WaitReporter {
	return sandbox.NewWaitReporter(ctx, b.opts.Progress, "kubernetes: ", what,
		b.cfg.StartTimeout.String()+" (kubernetes.start_timeout)", b.extra.WaitReport)
}
