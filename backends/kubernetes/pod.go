package kubernetes

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
)

// keeper is the container's first process: it only waits, so the helper (started by exec)
// can come and go; it ends at once when the kubelet stops the pod.
const keeper = `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`

// hermesDirSize bounds the helper's own emptyDir (the helper binary, session state, spills).
const hermesDirSize = 512 << 20

// labels are the labels of a session's pod ("" session: a warm pool pod).
func (b *Backend) labels(session string) map[string]string {
	l := map[string]string{}
	for k, v := range b.extra.Labels {
		l[k] = v
	}
	l[labelOurs] = "1"
	l[labelScope] = b.scope.ID()
	l[labelOwner] = b.owner
	if session != "" {
		l[labelSession] = b.sessionHash(session)
	} else {
		l[labelPool] = "ready"
		l[labelSpec] = b.specHash()
	}
	if b.denyEgress() {
		l[labelEgress] = "deny"
	}
	return l
}

func (b *Backend) annotations(session string) map[string]string {
	a := map[string]string{
		annoCreator: fmt.Sprintf("%s/%d", b.host, os.Getpid()),
		annoUsed:    time.Now().UTC().Format(time.RFC3339),
	}
	if session != "" {
		a[annoSession] = session
		if b.process != "" {
			a[annoOwnerProcess] = b.process
		}
	}
	return a
}

// Pod is the pod a session runs in ("" session: a warm pool pod), hardened beyond the
// restricted Pod Security profile. Exported for tests that check it against an API server.
func (b *Backend) Pod(session, name string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.namespace(), Labels: b.labels(session), Annotations: b.annotations(session)},
		Spec:       b.podSpec(),
	}
}

func (b *Backend) namespace() string {
	if b.conn != nil {
		return b.conn.namespace
	}
	return b.cfg.Namespace
}

func (b *Backend) podSpec() corev1.PodSpec {
	no, yes := false, true
	uid := b.cfg.RunAsUser
	lifetime := int64(b.cfg.MaxLifetime / time.Second)
	grace := int64(5)
	ws := b.cfg.WorkspaceSize.Bytes()
	env := []corev1.EnvVar{
		{Name: "HOME", Value: workdir},
		{Name: "TMPDIR", Value: tmpDir},
	}
	if b.network() == config.NetworkAllowlist {
		pe := egress.ProxyEnv()
		for _, k := range slices.Sorted(maps.Keys(pe)) {
			env = append(env, corev1.EnvVar{Name: k, Value: pe[k]})
		}
	}
	spec := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		AutomountServiceAccountToken:  &no,
		EnableServiceLinks:            &no,
		ActiveDeadlineSeconds:         &lifetime,
		TerminationGracePeriodSeconds: &grace,
		NodeSelector:                  b.cfg.NodeSelector,
		Tolerations:                   tolerations(b.cfg.Tolerations),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   &yes,
			RunAsUser:      &uid,
			RunAsGroup:     &uid,
			FSGroup:        &uid,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Volumes: []corev1.Volume{
			emptyDir("workspace", ws),
			emptyDir("tmp", max(ws/4, 16<<20)),
			emptyDir("hermes", hermesDirSize),
		},
		Containers: []corev1.Container{{
			Name:       containerName,
			Image:      b.cfg.Image,
			Command:    []string{"/bin/sh", "-c", keeper},
			WorkingDir: workdir,
			Env:        env,
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot:             &yes,
				RunAsUser:                &uid,
				RunAsGroup:               &uid,
				ReadOnlyRootFilesystem:   &yes,
				AllowPrivilegeEscalation: &no,
				Privileged:               &no,
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "workspace", MountPath: workdir},
				{Name: "tmp", MountPath: tmpDir},
				{Name: "hermes", MountPath: hermesDir},
			},
			Resources:                resources(b.cfg),
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
	}
	if b.cfg.RuntimeClass != "" {
		rc := b.cfg.RuntimeClass
		spec.RuntimeClassName = &rc
	}
	return spec
}

func emptyDir(name string, size int64) corev1.Volume {
	q := resource.NewQuantity(size, resource.BinarySI)
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: q}}}
}

// resources sets requests equal to limits for what is configured (the Guaranteed class
// where everything is).
func resources(c config.KubernetesConfig) corev1.ResourceRequirements {
	l := corev1.ResourceList{}
	if c.CPU > 0 {
		l[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(c.CPU*1000), resource.DecimalSI)
	}
	if c.Memory > 0 {
		l[corev1.ResourceMemory] = *resource.NewQuantity(c.Memory.Bytes(), resource.BinarySI)
	}
	if c.EphemeralStorage > 0 {
		l[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(c.EphemeralStorage.Bytes(), resource.BinarySI)
	}
	if len(l) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Limits: l, Requests: l.DeepCopy()}
}

func tolerations(specs []string) []corev1.Toleration {
	var out []corev1.Toleration
	for _, s := range specs {
		t, err := config.ParseToleration(s)
		if err != nil {
			continue // Validate reported it
		}
		out = append(out, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator),
			Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return out
}

// policyName is the scope's deny-all-egress NetworkPolicy.
func (b *Backend) policyName() string { return "hermes-" + b.scope.ID() + "-deny-egress" }

// NetworkPolicy denies all egress (DNS included) to this scope's pods unless
// kubernetes.network is open. Exported for tests.
func (b *Backend) NetworkPolicy() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: b.policyName(), Namespace: b.namespace(),
			Labels: map[string]string{labelOurs: "1", labelScope: b.scope.ID(), labelOwner: b.owner}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelScope: b.scope.ID(), labelEgress: "deny"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{},
		},
	}
}

// The agent-sandbox API (kubernetes-sigs/agent-sandbox), used through the dynamic client.
var sandboxGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

// SandboxObject is the agents.x-k8s.io Sandbox for a session: its controller makes a pod of
// the same name from spec.podTemplate. Exported for tests.
func (b *Backend) SandboxObject(session, name string) (*unstructured.Unstructured, error) {
	pod := b.Pod(session, name)
	tmpl, err := podTemplate(pod)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1",
		"kind":       "Sandbox",
		"metadata": map[string]any{
			"name": name, "namespace": b.namespace(),
			"labels": toAny(pod.Labels), "annotations": toAny(pod.Annotations),
		},
		"spec": map[string]any{"podTemplate": tmpl},
	}}, nil
}

// podTemplate is pod's metadata and spec as an agent-sandbox podTemplate.
func podTemplate(pod *corev1.Pod) (map[string]any, error) {
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod.Spec)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"metadata": map[string]any{"labels": toAny(pod.Labels), "annotations": toAny(pod.Annotations)},
		"spec":     spec,
	}, nil
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
