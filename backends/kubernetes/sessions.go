package kubernetes

import (
	"context"

	"fmt"
	"sort"
	"strings"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Sessions lists this state directory's sessions, on whatever nodes their pods run.
func (b *Backend) Sessions(ctx context.Context) ([]sandbox.SessionInfo, error) {
	c, err := b.cluster()
	if err != nil {
		return nil, err
	}
	sel := labels.SelectorFromSet(labels.Set{labelOurs: "1", labelScope: b.scope.ID()}).String()
	list, err := c.api.pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, b.mapErr("list", "", err)
	}
	var out []sandbox.SessionInfo
	for _, p := range list.Items {
		name := p.Annotations[annoSession]
		if name == "" || sandbox.ValidateSessionName(name) != nil || p.Labels[labelSession] != b.sessionHash(name) {
			continue // a pool pod, or not ours
		}
		info := sandbox.SessionInfo{Name: name, Backend: Name, ID: c.namespace + "/" + p.Name, State: podState(&p), Created: p.CreationTimestamp.Time}
		if t, err := time.Parse(time.RFC3339, p.Annotations[annoUsed]); err == nil {
			info.Used = t
		}
		if p.Spec.NodeName != "" {
			info.Mode = "node " + p.Spec.NodeName
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func podState(p *corev1.Pod) string {
	switch {
	case p.DeletionTimestamp != nil:
		return "terminating"
	case p.Status.Phase == corev1.PodRunning:
		return "running"
	case p.Status.Phase == corev1.PodPending:
		return "pending"
	}
	s := strings.ToLower(string(p.Status.Phase))
	if p.Status.Reason != "" {
		s += " (" + p.Status.Reason + ")"
	}
	return s
}

// Remove deletes the session's pod (or Sandbox) and forgets the session.
func (b *Backend) Remove(ctx context.Context, name string) error {
	if err := sandbox.ValidateSessionName(name); err != nil {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: err}
	}
	defer sandbox.RemoveSpills(b.spillDir, name)
	defer b.overrides().Remove(name) // a live allowlist change ends with its session
	defer b.forgetBroker(name)       // and its placeholders and CA (secrets.go)
	c, err := b.cluster()
	if err != nil {
		return err
	}
	found := false
	if b.cfg.Mode == config.KubernetesModeAgentSandbox {
		claimed, err := b.removeClaim(ctx, c, name)
		if err != nil {
			return err
		}
		found = claimed
		err = c.dynamic.Resource(sandboxGVR).Namespace(c.namespace).Delete(ctx, b.podName(name), metav1.DeleteOptions{})
		if err == nil {
			found = true
		} else if !apierrors.IsNotFound(err) {
			return b.mapErr("remove", name, err)
		}
	}
	sel := labels.SelectorFromSet(labels.Set{labelScope: b.scope.ID(), labelSession: b.sessionHash(name)}).String()
	list, err := c.api.pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return b.mapErr("remove", name, err)
	}
	for i := range list.Items {
		found = true
		if err := b.deleteNow(ctx, c, &list.Items[i]); err != nil {
			return err
		}
	}
	b.records.Drop(name)
	if !found {
		return &sandbox.Error{Backend: Name, Op: "remove", ID: name, Err: fmt.Errorf("no pod for session %q in namespace %s: %w", name, c.namespace, sandbox.ErrNotFound)}
	}
	return nil
}

// idleDefault is how long gc lets a session's pod sit unused when gc --idle does not say.
const idleDefault = time.Hour

// Collect removes this scope's pods that have ended, whose owner process is gone (an MCP
// server's, killed before it could remove its sessions; whatever their idle time), that sat
// unused past the idle timeout (by the pod's last-use annotation), and warm pods beyond
// kubernetes.pool_size. Other scopes' pods and objects without our labels are never touched.
func (b *Backend) Collect(ctx context.Context, opts sandbox.GCOptions) (sandbox.GCReport, error) {
	c, err := b.cluster()
	if err != nil {
		return sandbox.GCReport{}, err
	}
	sel := labels.SelectorFromSet(labels.Set{labelOurs: "1", labelScope: b.scope.ID()}).String()
	list, err := c.api.pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return sandbox.GCReport{}, b.mapErr("gc", "", err)
	}
	pool := 0
	cands := make([]sandbox.GCCandidate, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		cand := sandbox.GCCandidate{Kind: "pod", Name: c.namespace + "/" + p.Name, Owner: p.Annotations[annoOwnerProcess],
			Remove: func(ctx context.Context) error {
				if err := b.deleteNow(ctx, c, p); err != nil {
					return err
				}
				if p.Annotations[annoSession] != "" && b.cfg.Mode == config.KubernetesModeAgentSandbox {
					c.dynamic.Resource(sandboxGVR).Namespace(c.namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
				}
				return nil
			}}
		if s := p.Annotations[annoSession]; s != "" {
			cand.Name += " (session " + s + ")"
		}
		cand.LastUsed, _ = time.Parse(time.RFC3339, p.Annotations[annoUsed])
		switch {
		case ended(p):
			cand.Reap = "ended: " + podState(p)
		case p.Labels[labelPool] != "ready":
		case b.cfg.Mode == config.KubernetesModeAgentSandbox:
			cand.Keep = "warm pool (the SandboxWarmPool's)"
		case b.stale(p):
			cand.Reap = "warm pod made with other settings, or past half its lifetime"
		case pool < b.cfg.PoolSize:
			pool++
			cand.Keep = "warm pool"
		default:
			cand.Reap = fmt.Sprintf("warm pod beyond kubernetes.pool_size %d", b.cfg.PoolSize)
		}
		cands = append(cands, cand)
	}
	return sandbox.Reap(ctx, cands, opts, idleDefault, "the default")
}

// permission is one access the backend needs, checked with a SelfSubjectAccessReview.
type permission struct {
	verb, group, resource, subresource string
}

func (p permission) String() string {
	r := p.resource
	if p.subresource != "" {
		r += "/" + p.subresource
	}
	if p.group != "" {
		r += "." + p.group
	}
	return p.verb + " " + r
}

func (b *Backend) permissions() []permission {
	ps := []permission{
		{"create", "", "pods", ""}, {"get", "", "pods", ""}, {"list", "", "pods", ""},
		{"delete", "", "pods", ""}, {"patch", "", "pods", ""}, {"create", "", "pods", "exec"},
	}
	if b.denyEgress() {
		ps = append(ps, permission{"create", "networking.k8s.io", "networkpolicies", ""})
	}
	if b.cfg.PoolSize > 0 {
		ps = append(ps, permission{"update", "", "pods", ""})
	}
	if b.cfg.Mode == config.KubernetesModeAgentSandbox {
		ps = append(ps, permission{"create", "agents.x-k8s.io", "sandboxes", ""}, permission{"delete", "agents.x-k8s.io", "sandboxes", ""})
		if b.cfg.PoolSize > 0 {
			const ext = "extensions.agents.x-k8s.io"
			ps = append(ps, permission{"create", ext, "sandboxclaims", ""}, permission{"delete", ext, "sandboxclaims", ""},
				permission{"create", ext, "sandboxtemplates", ""}, permission{"update", ext, "sandboxtemplates", ""},
				permission{"create", ext, "sandboxwarmpools", ""}, permission{"update", ext, "sandboxwarmpools", ""})
		}
	}
	return ps
}

// Check proves the cluster answers, reports its version, and checks with
// SelfSubjectAccessReviews that the credentials may do what sessions need, naming what is
// missing.
func (b *Backend) Check(ctx context.Context) error {
	c, err := b.cluster()
	if err != nil {
		return err
	}
	v, err := c.api.serverVersion(ctx)
	if err != nil {
		return &sandbox.Error{Backend: Name, Op: "check", ID: c.server, Err: b.classify(err)}
	}
	b.mu.Lock()
	b.version = v.GitVersion
	b.mu.Unlock()
	var missing []string
	for _, p := range b.permissions() {
		ssar := &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
			Namespace: c.namespace, Verb: p.verb, Group: p.group, Resource: p.resource, Subresource: p.subresource,
		}}}
		res, err := c.api.selfSubjectAccessReviews().Create(ctx, ssar, metav1.CreateOptions{})
		if err != nil {
			return &sandbox.Error{Backend: Name, Op: "check access", ID: p.String(), Err: b.classify(err)}
		}
		if !res.Status.Allowed {
			missing = append(missing, p.String())
		}
	}
	if len(missing) > 0 {
		return &sandbox.Error{Backend: Name, Op: "check access", ID: c.namespace, Err: fmt.Errorf(
			"the credentials (%s) may not %s in namespace %s; grant them with a Role and RoleBinding (README: Kubernetes), or pick another kubernetes.namespace: %w",
			c.source, strings.Join(missing, ", "), c.namespace, sandbox.ErrDenied)}
	}
	if err := b.checkRuntimeClass(ctx, c); err != nil {
		return err
	}
	if b.cfg.Mode == config.KubernetesModeAgentSandbox {
		if _, err := c.dynamic.Resource(sandboxGVR).Namespace(c.namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			if apierrors.IsNotFound(err) {
				return &sandbox.Error{Backend: Name, Op: "check", ID: "agent-sandbox", Err: fmt.Errorf("kubernetes.mode is agent-sandbox but the cluster serves no agents.x-k8s.io/v1beta1 "+
					"Sandbox; install agent-sandbox or set kubernetes.mode pod: %w", sandbox.ErrInvalidConfig)}
			}
			if !apierrors.IsForbidden(err) {
				return b.mapErr("check", "agent-sandbox", err)
			}
		}
	}
	return nil
}

// Describe says which cluster, namespace and credentials are used, for doctor.
func (b *Backend) Describe() string {
	if b.connErr != nil {
		return "" // the problem line already says why there is no cluster
	}
	b.mu.Lock()
	v := b.version
	b.mu.Unlock()
	s := "cluster " + b.conn.server
	if v != "" {
		s += " (Kubernetes " + v + ")"
	}
	s += ", namespace " + b.conn.namespace + ", credentials from " + b.conn.source + ", mode " + string(b.cfg.Mode)
	if b.denyEgress() {
		s += "; the deny-all egress NetworkPolicy is enforced only by a NetworkPolicy-capable CNI (Calico, Cilium, …)"
	}
	return s
}

// Warnings lists settings that weaken isolation.
func (b *Backend) Warnings() []string {
	var w []string
	if b.network() == config.NetworkOpen {
		key := "kubernetes.network is open"
		if b.cfg.Network == "" {
			key = "kubernetes.network_enabled is true"
		}
		w = append(w, key+": pods reach whatever the cluster network reaches; kubernetes.network allowlist with kubernetes.egress_allow lets through only the hosts you list")
	}
	if b.cfg.RuntimeClass == "" {
		w = append(w, "kubernetes.runtime_class is unset: pods share the node's kernel (gvisor or kata isolate more)")
	}
	return w
}

// SetupHint says which cluster the kubeconfig points at.
func (b *Backend) SetupHint() string {
	if b.connErr != nil {
		return "No cluster found: " + b.connErr.Error()
	}
	return "Found a cluster at " + b.conn.server + " (from " + b.conn.source + "), namespace " + b.conn.namespace + "."
}

var (
	_ sandbox.SessionManager = (*Backend)(nil)
	_ sandbox.Collector      = (*Backend)(nil)
	_ sandbox.Checker        = (*Backend)(nil)
	_ sandbox.Warner         = (*Backend)(nil)
)
