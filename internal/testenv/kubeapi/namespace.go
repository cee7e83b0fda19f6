package kubeapi

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Namespace creates a fresh namespace (generated name, prefix "hermes-test-") with labels and
// its "default" ServiceAccount (no controller-manager creates it, and the ServiceAccount
// admission plugin rejects pods without it), and returns its name. At cleanup it deletes the
// namespace, its objects, and finalizes it (no namespace controller does); objects that hold
// finalizers of their own stay in etcd, unreachable once the namespace is gone.
func (s *Server) Namespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "hermes-test-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubeapi: create namespace: %v", err)
	}
	name := ns.Name
	t.Cleanup(func() {
		if err := s.deleteNamespace(name); err != nil {
			t.Errorf("kubeapi: delete namespace %s: %v", name, err)
		}
	})
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := s.Client.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubeapi: create the default ServiceAccount in %s: %v", name, err)
	}
	return name
}

// deleteNamespace does what the namespace controller would: it marks the namespace deleted (so
// it takes no new objects), deletes every namespaced collection in it, then removes the
// "kubernetes" finalizer, which lets the apiserver remove the namespace.
func (s *Server) deleteNamespace(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nsc := s.Client.CoreV1().Namespaces()
	if err := nsc.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	lists, err := s.Client.Discovery().ServerPreferredNamespacedResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return err
	}
	zero, background := int64(0), metav1.DeletePropagationBackground
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if !hasVerb(r.Verbs, "deletecollection") {
				continue
			}
			err := s.cleaner.Resource(gv.WithResource(r.Name)).Namespace(name).DeleteCollection(ctx,
				metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &background}, metav1.ListOptions{})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
				return err
			}
		}
	}
	ns, err := nsc.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	ns.Spec.Finalizers = nil
	if _, err := nsc.Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func hasVerb(verbs []string, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}

// Kubeconfig writes a kubeconfig file (mode 0600, in t.TempDir()) with one cluster, user and
// context: server (s.URL, or a proxy in front of it), the CA that verifies it (required),
// bearer token, and namespace as the context's namespace. It returns the file's path.
func Kubeconfig(t testing.TB, server string, caPEM []byte, token, namespace string) string {
	t.Helper()
	if len(caPEM) == 0 {
		t.Fatal("kubeapi: Kubeconfig needs the server's CA (Server.CAData, or the proxy's)")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hermes-test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["hermes-test"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["hermes-test"] = &clientcmdapi.Context{Cluster: "hermes-test", AuthInfo: "hermes-test", Namespace: namespace}
	cfg.CurrentContext = "hermes-test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("kubeapi: write kubeconfig: %v", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
