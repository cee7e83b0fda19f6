package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

// The backend talks to the API server through REST clients for just the four API groups it
// uses, instead of client-go's generated clientset: that clientset's scheme registers every
// built-in API group, which more than doubled the size of the static binary (30 MB → 66 MB).

var (
	apiScheme = runtime.NewScheme()
	apiCodecs = serializer.NewCodecFactory(apiScheme)
	apiParams = runtime.NewParameterCodec(apiScheme)
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, networkingv1.AddToScheme, nodev1.AddToScheme, authv1.AddToScheme} {
		if err := add(apiScheme); err != nil {
			panic(err)
		}
	}
	metav1.AddToGroupVersion(apiScheme, schema.GroupVersion{Version: "v1"})
}

// clients holds one REST client per API group version.
type clients struct {
	core, networking, node, authz *rest.RESTClient
	root                          *rest.RESTClient // for /version
}

func newClients(rc *rest.Config) (*clients, error) {
	mk := func(gv schema.GroupVersion, prefix string) (*rest.RESTClient, error) {
		c := rest.CopyConfig(rc)
		c.GroupVersion = &gv
		c.APIPath = prefix
		c.NegotiatedSerializer = apiCodecs.WithoutConversion()
		c.ContentType = runtime.ContentTypeJSON
		return rest.RESTClientFor(c)
	}
	var cs clients
	var err error
	if cs.core, err = mk(corev1.SchemeGroupVersion, "/api"); err != nil {
		return nil, err
	}
	if cs.networking, err = mk(networkingv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if cs.node, err = mk(nodev1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if cs.authz, err = mk(authv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	root := rest.CopyConfig(rc)
	root.GroupVersion = &schema.GroupVersion{}
	root.NegotiatedSerializer = apiCodecs.WithoutConversion()
	if cs.root, err = rest.UnversionedRESTClientFor(root); err != nil {
		return nil, err
	}
	return &cs, nil
}

// typedResource is a typed client for one resource: T its object, L its list.
type typedResource[T, L runtime.Object] struct {
	rc       *rest.RESTClient
	ns       string // "" for cluster-scoped
	resource string
	newT     func() T
	newL     func() L
}

func (r typedResource[T, L]) req(verb string) *rest.Request {
	q := r.rc.Verb(verb).Resource(r.resource)
	if r.ns != "" {
		q = q.Namespace(r.ns)
	}
	return q
}

func (r typedResource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newT()
	err := r.req("GET").Name(name).VersionedParams(&opts, apiParams).Do(ctx).Into(out)
	return out, err
}

func (r typedResource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newL()
	err := r.req("GET").VersionedParams(&opts, apiParams).Do(ctx).Into(out)
	return out, err
}

func (r typedResource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newT()
	err := r.req("POST").VersionedParams(&opts, apiParams).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update replaces obj, named by its metadata (its resourceVersion guards the write).
func (r typedResource[T, L]) Update(ctx context.Context, name string, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newT()
	err := r.req("PUT").Name(name).VersionedParams(&opts, apiParams).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r typedResource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	body, err := json.Marshal(&opts)
	if err != nil {
		return err
	}
	return r.req("DELETE").Name(name).Body(body).Do(ctx).Error()
}

func (r typedResource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (T, error) {
	out := r.newT()
	err := r.rc.Patch(pt).Namespace(r.ns).Resource(r.resource).Name(name).VersionedParams(&opts, apiParams).Body(data).Do(ctx).Into(out)
	return out, err
}

func (cs *clients) pods(ns string) typedResource[*corev1.Pod, *corev1.PodList] {
	return typedResource[*corev1.Pod, *corev1.PodList]{cs.core, ns, "pods", func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} }}
}

func (cs *clients) networkPolicies(ns string) typedResource[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList] {
	return typedResource[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList]{cs.networking, ns, "networkpolicies",
		func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} },
		func() *networkingv1.NetworkPolicyList { return &networkingv1.NetworkPolicyList{} }}
}

func (cs *clients) runtimeClasses() typedResource[*nodev1.RuntimeClass, *nodev1.RuntimeClassList] {
	return typedResource[*nodev1.RuntimeClass, *nodev1.RuntimeClassList]{cs.node, "", "runtimeclasses",
		func() *nodev1.RuntimeClass { return &nodev1.RuntimeClass{} }, func() *nodev1.RuntimeClassList { return &nodev1.RuntimeClassList{} }}
}

func (cs *clients) selfSubjectAccessReviews() typedResource[*authv1.SelfSubjectAccessReview, *authv1.SelfSubjectAccessReview] {
	n := func() *authv1.SelfSubjectAccessReview { return &authv1.SelfSubjectAccessReview{} }
	return typedResource[*authv1.SelfSubjectAccessReview, *authv1.SelfSubjectAccessReview]{cs.authz, "", "selfsubjectaccessreviews", n, n}
}

// serverVersion is GET /version.
func (cs *clients) serverVersion(ctx context.Context) (*version.Info, error) {
	body, err := cs.root.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("the server's /version: %w", err)
	}
	return &info, nil
}
