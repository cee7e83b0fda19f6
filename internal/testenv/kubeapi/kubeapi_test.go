package kubeapi_test

import (
	"os"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/kubeapi"
)

const crdDir = "../../../backends/kubernetes/crds"

func TestMain(m *testing.M) { kubeapi.Main(m) }

func TestServerVersion(t *testing.T) {
	s := kubeapi.Start(t)
	t.Logf("etcd and kube-apiserver started in %v", s.Started)
	v, err := s.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("ServerVersion() = %v", err)
	}
	// scripts/kube-apiserver.sh builds without the release's version stamp (ldflags -X), so
	// the binary reports its placeholder; the build's Go toolchain proves it answered.
	if v.GoVersion == "" || v.Platform != "linux/amd64" && v.Platform != "linux/arm64" {
		t.Errorf("ServerVersion() = %+v; want a build's Go version and a linux platform", v)
	}
	t.Logf("server version %s (%s, %s)", v.GitVersion, v.GoVersion, v.Platform)
	rc, err := s.Client.NodeV1().RuntimeClasses().Get(t.Context(), kubeapi.RuntimeClass, metav1.GetOptions{})
	if err != nil || rc.Handler != "runsc" {
		t.Errorf("RuntimeClass %s = %v, %v; want handler runsc", kubeapi.RuntimeClass, rc, err)
	}
}

// clientAs is a clientset that authenticates with token.
func clientAs(t *testing.T, s *kubeapi.Server, token string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(s.Admin)
	cfg.BearerToken = token
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// whoami returns the user the server sees behind c.
func whoami(t *testing.T, c kubernetes.Interface) authnv1.UserInfo {
	t.Helper()
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview = %v", err)
	}
	return r.Status.UserInfo
}

// canCreatePods asks the server whether c's user may create pods in ns.
func canCreatePods(t *testing.T, c kubernetes.Interface, ns string) bool {
	t.Helper()
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), &authzv1.SelfSubjectAccessReview{
		Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: ns, Verb: "create", Resource: "pods",
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectAccessReview = %v", err)
	}
	return r.Status.Allowed
}

func pod(name string, sc *corev1.SecurityContext, psc *corev1.PodSecurityContext) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			SecurityContext: psc,
			Containers:      []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: sc}},
		},
	}
}

func privilegedPod() *corev1.Pod {
	yes := true
	return pod("privileged", &corev1.SecurityContext{Privileged: &yes}, nil)
}

func TestRBAC(t *testing.T) {
	s := kubeapi.Start(t)
	ns := s.Namespace(t, nil)
	limited := clientAs(t, s, s.LimitedToken)

	// The token authenticates; what follows is authorization.
	if u := whoami(t, limited); u.Username != kubeapi.LimitedUser {
		t.Fatalf("limited token's user = %q; want %q", u.Username, kubeapi.LimitedUser)
	}
	if u := whoami(t, s.Client); u.Username != kubeapi.AdminUser || !strings.Contains(strings.Join(u.Groups, ","), "system:masters") {
		t.Fatalf("admin token's user = %+v; want %q in system:masters", u, kubeapi.AdminUser)
	}
	if canCreatePods(t, limited, ns) {
		t.Errorf("SelfSubjectAccessReview(%s, create pods) allowed; want denied", kubeapi.LimitedUser)
	}
	if !canCreatePods(t, s.Client, ns) {
		t.Errorf("SelfSubjectAccessReview(%s, create pods) denied; want allowed", kubeapi.AdminUser)
	}
	_, err := limited.CoreV1().Pods(ns).Create(t.Context(), pod("p", nil, nil), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("create pod as %s = %v; want Forbidden", kubeapi.LimitedUser, err)
	}
	if _, err := s.Client.CoreV1().Pods(ns).Create(t.Context(), pod("p", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Errorf("create pod as %s = %v; want it created", kubeapi.AdminUser, err)
	}
}

func TestPodSecurityRestricted(t *testing.T) {
	s := kubeapi.Start(t)

	// First prove a privileged pod is admitted where no level is enforced, so the rejection
	// below comes from the namespace's label.
	open := s.Namespace(t, nil)
	if _, err := s.Client.CoreV1().Pods(open).Create(t.Context(), privilegedPod(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create privileged pod in an unlabelled namespace = %v; want it created", err)
	}

	ns := s.Namespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	_, err := s.Client.CoreV1().Pods(ns).Create(t.Context(), privilegedPod(), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
		t.Errorf("create privileged pod in a restricted namespace = %v; want Forbidden, violates PodSecurity", err)
	}

	no, uid := false, int64(1000)
	yes := true
	p := pod("restricted",
		&corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		&corev1.PodSecurityContext{
			RunAsNonRoot:   &yes,
			RunAsUser:      &uid,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		})
	rc := kubeapi.RuntimeClass
	p.Spec.RuntimeClassName = &rc
	got, err := s.Client.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create restricted pod = %v; want it created", err)
	}
	if got.Spec.ServiceAccountName != "default" {
		t.Errorf("pod's serviceAccountName = %q; want %q (ServiceAccount admission)", got.Spec.ServiceAccountName, "default")
	}
}

var sandboxes = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

func sandbox(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1",
		"kind":       "Sandbox",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
}

func TestCRDs(t *testing.T) {
	s := kubeapi.Start(t)
	s.InstallCRDs(t, crdDir)
	s.InstallCRDs(t, crdDir) // idempotent
	ns := s.Namespace(t, nil)
	sc := s.Dynamic.Resource(sandboxes).Namespace(ns)

	spec := map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "sandbox", "image": "busybox:1.37"}},
	}}}
	if _, err := sc.Create(t.Context(), sandbox("sb", spec), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Sandbox = %v", err)
	}
	got, err := sc.Get(t.Context(), "sb", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Sandbox = %v", err)
	}
	var image string
	containers, _, _ := unstructured.NestedSlice(got.Object, "spec", "podTemplate", "spec", "containers")
	if len(containers) == 1 {
		image, _ = containers[0].(map[string]any)["image"].(string)
	}
	if image != "busybox:1.37" {
		t.Errorf("Sandbox's spec.podTemplate = %v; want the container image busybox:1.37 kept", got.Object["spec"])
	}

	_, err = sc.Create(t.Context(), sandbox("invalid", map[string]any{}), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "podTemplate") {
		t.Errorf("create Sandbox without podTemplate = %v; want Invalid, naming spec.podTemplate", err)
	}
}

func TestKubeconfig(t *testing.T) {
	s := kubeapi.Start(t)
	ns := s.Namespace(t, nil)
	path := kubeapi.Kubeconfig(t, s.URL, s.CAData, s.LimitedToken, ns)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("Stat(%q) = %v, %v; want mode 0600", path, fi, err)
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
	if got, _, err := cc.Namespace(); err != nil || got != ns {
		t.Errorf("kubeconfig namespace = %q, %v; want %q", got, err, ns)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if u := whoami(t, c); u.Username != kubeapi.LimitedUser {
		t.Errorf("kubeconfig's user = %q; want %q", u.Username, kubeapi.LimitedUser)
	}
}

func TestNamespaceCleanup(t *testing.T) {
	s := kubeapi.Start(t)
	var ns string
	t.Run("use", func(t *testing.T) {
		ns = s.Namespace(t, map[string]string{"hermes-test": "cleanup"})
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}
		if _, err := s.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Client.CoreV1().ServiceAccounts(ns).Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
			t.Errorf("get the default ServiceAccount = %v", err)
		}
	})
	if !strings.HasPrefix(ns, "hermes-test-") {
		t.Fatalf("Namespace() = %q; want prefix hermes-test-", ns)
	}
	if _, err := s.Client.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get namespace %s after its test = %v; want NotFound", ns, err)
	}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Get(t.Context(), "cm", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get configmap in namespace %s after its test = %v; want NotFound", ns, err)
	}
}
