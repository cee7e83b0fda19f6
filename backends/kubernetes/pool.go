package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// The warm pool (kubernetes.pool_size): ready pods labelled hermes-sandbox/pool=ready, of this
// scope and spec, that a new session takes over by relabelling (an update guarded by the
// pod's resourceVersion, so two sessions never take the same pod), instead of waiting for
// scheduling and image start.

func (b *Backend) poolSelector() string {
	return labels.SelectorFromSet(labels.Set{labelScope: b.scope.ID(), labelPool: "ready"}).String()
}

// specHash names the pod spec a pool pod was made with (image, user, resources, runtime
// class, placement, lifetime…): a session takes only a warm pod made as its own would be.
func (b *Backend) specHash() string {
	data, _ := json.Marshal(b.podSpec())
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

// usable says a pool pod may be handed to a session: made with this spec, running, and young
// enough that most of kubernetes.max_lifetime (counted from its creation) is left.
func (b *Backend) usable(p *corev1.Pod) bool {
	return p.Labels[labelSpec] == b.specHash() && !ended(p) && p.Status.Phase == corev1.PodRunning &&
		time.Since(p.CreationTimestamp.Time) < b.cfg.MaxLifetime/2
}

// stale says a pool pod will never be handed out and should go.
func (b *Backend) stale(p *corev1.Pod) bool {
	return ended(p) || p.Labels[labelSpec] != b.specHash() || time.Since(p.CreationTimestamp.Time) >= b.cfg.MaxLifetime/2
}

// claim takes a running pool pod for session (and refills the pool), or returns nil when none
// is ready.
func (b *Backend) claim(ctx context.Context, c *conn, session string) (*corev1.Pod, error) {
	pods := c.api.pods(c.namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: b.poolSelector()})
	if err != nil {
		return nil, b.mapErr("list pool", session, err)
	}
	for i := range list.Items {
		p := list.Items[i].DeepCopy()
		if !b.usable(p) {
			continue
		}
		l := maps.Clone(p.Labels)
		delete(l, labelPool)
		maps.Copy(l, b.labels(session))
		p.Labels = l
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		maps.Copy(p.Annotations, b.annotations(session))
		got, err := pods.Update(ctx, p.Name, p, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue // another session took it first
		}
		if err != nil {
			return nil, b.mapErr("claim pool pod", session, err)
		}
		b.log.Debug("took a warm pod", "session", session, "pod", got.Name)
		b.refill(ctx, c)
		return got, nil
	}
	return nil, nil // the caller makes the session's own pod first, then refills
}

// refill creates pool pods until kubernetes.pool_size are alive, and deletes ended ones.
// Failures are logged: the pool is an optimisation.
func (b *Backend) refill(ctx context.Context, c *conn) {
	pods := c.api.pods(c.namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: b.poolSelector()})
	if err != nil {
		b.log.Debug("pool: list", "err", err)
		return
	}
	alive := 0
	zero := int64(0)
	for _, p := range list.Items {
		if b.stale(&p) {
			if p.DeletionTimestamp == nil {
				pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
			continue
		}
		alive++
	}
	for ; alive < b.cfg.PoolSize; alive++ {
		pod := b.Pod("", "")
		pod.GenerateName = "hermes-" + b.scope.ID() + "-pool-"
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.log.Warn("pool: could not create a warm pod", "err", b.admissionErr("create pool pod", "", err))
			return
		}
	}
}

// PoolStats reports the warm pool: kubernetes.pool_size, and how many of its members the
// cluster holds ready now. In pod mode those are the scope's pool pods a session of this spec
// would take (usable); in agent-sandbox mode it is the SandboxWarmPool's status.readyReplicas,
// as its controller counts them. It asks the cluster, so it fails when the cluster does not
// answer; before any session (no pool made yet) nothing is ready.
func (b *Backend) PoolStats(ctx context.Context) (sandbox.PoolStats, error) {
	st := sandbox.PoolStats{Size: max(b.cfg.PoolSize, 0)}
	if st.Size == 0 {
		return st, nil
	}
	c, err := b.cluster()
	if err != nil {
		return st, err
	}
	if b.cfg.Mode == config.KubernetesModeAgentSandbox {
		pool, err := c.dynamic.Resource(warmPoolGVR).Namespace(c.namespace).Get(ctx, b.warmPoolName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return st, nil
		}
		if err != nil {
			return st, b.mapErr("get SandboxWarmPool", b.warmPoolName(), err)
		}
		n, _, err := unstructured.NestedInt64(pool.Object, "status", "readyReplicas")
		if err != nil {
			return st, &sandbox.Error{Backend: Name, Op: "read SandboxWarmPool status", ID: b.warmPoolName(), Err: err}
		}
		st.Ready = int(n)
		return st, nil
	}
	list, err := c.api.pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: b.poolSelector()})
	if err != nil {
		return st, b.mapErr("list pool", "", err)
	}
	for i := range list.Items {
		if b.usable(&list.Items[i]) {
			st.Ready++
		}
	}
	return st, nil
}

var _ sandbox.PoolReporter = (*Backend)(nil)
