package kubetest

// The endpoint: a reverse proxy to the apiserver that serves pod exec itself, after the checks
// the apiserver would make (authentication, RBAC on pods/exec, the pod and its container) and
// the ones the kubelet would (the streams asked for, a running container).

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// upstreamTransport is an HTTP/1.1 transport that trusts the apiserver's CA (HTTP/1.1 so that
// upgrade requests pass through).
func (n *Node) upstreamTransport() (*http.Transport, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(n.api.CAData) {
		return nil, errors.New("the apiserver's CA data holds no certificate")
	}
	return &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}, nil
}

// handler routes pod exec to serveExec and everything else to the apiserver.
func (n *Node) handler(up http.RoundTripper) http.Handler {
	target, _ := url.Parse(n.api.URL)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target) // keeps the caller's Authorization (and Impersonate-*) headers
		},
		Transport:     up,
		FlushInterval: -1, // watches stream
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			n.log.Debug("kubetest: proxy to the apiserver", "path", r.URL.Path, "err", err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/namespaces/{ns}/pods/{name}/exec", n.serveExec)
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods/{name}/exec", n.serveExec)
	mux.Handle("/", proxy)
	return mux
}

// serveExec is the apiserver's pods/exec connect handler and the kubelet's exec endpoint in one.
func (n *Node) serveExec(w http.ResponseWriter, req *http.Request) {
	n.handlers.Add(1)
	defer n.handlers.Done()
	ns, name := req.PathValue("ns"), req.PathValue("name")
	ctx := req.Context()

	// The apiserver: authenticate, authorize create on pods/exec, decode the options.
	user, ok := n.authenticate(w, req)
	if !ok {
		return
	}
	if !n.authorize(w, req, user, ns, name) {
		return
	}
	opts := execOptions(req.URL.Query())
	pod, err := n.api.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		writeStatus(w, err)
		return
	}
	container, err := execContainer(pod, opts.Container)
	if err != nil {
		writeStatus(w, err)
		return
	}
	if pod.Spec.NodeName == "" {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", name)))
		return
	}

	// The kubelet: the streams, the pod, the running container. The apiserver calls it with
	// its own parameter names (streamParams).
	kq := url.Values{"command": opts.Command}
	for k, on := range map[string]bool{remotecommand.ExecStdinParam: opts.Stdin, remotecommand.ExecStdoutParam: opts.Stdout,
		remotecommand.ExecStderrParam: opts.Stderr, remotecommand.ExecTTYParam: opts.TTY} {
		if on {
			kq.Set(k, "1")
		}
	}
	req = req.Clone(ctx)
	req.URL.RawQuery, req.Form = kq.Encode(), nil
	streamOpts, err := remotecommand.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	owner := nodeFor(pod.Spec.NodeName)
	if owner == nil {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("no kubelet answers for node %s: it is not one of this process's fake nodes", pod.Spec.NodeName)))
		return
	}
	id, err := owner.runningContainer(ctx, pod, container)
	if err != nil {
		streaming.WriteError(err, w)
		return
	}
	exec := &dockerExec{cli: owner.docker, containerID: id, served: &n.execs}
	remotecommand.ServeExec(w, req, exec, pod.Namespace+"/"+pod.Name, string(pod.UID), container, opts.Command, streamOpts,
		4*time.Hour, remotecommand.DefaultStreamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// execOptions decodes the query as the apiserver's generated conversion of PodExecOptions does:
// command repeated, container the first value, and each boolean false only when absent, "0"
// or "false" (any case).
func execOptions(q url.Values) *corev1.PodExecOptions {
	flag := func(k string) bool {
		v := q[k]
		var b bool
		runtime.Convert_Slice_string_To_bool(&v, &b, nil)
		return b
	}
	opts := &corev1.PodExecOptions{Command: q["command"], Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty")}
	if c := q["container"]; len(c) > 0 {
		opts.Container = c[0]
	}
	return opts
}

// execContainer resolves the exec's container as the apiserver does.
func execContainer(pod *corev1.Pod, name string) (string, error) {
	if name == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		default:
			names := make([]string, 0, len(pod.Spec.Containers))
			for _, c := range pod.Spec.Containers {
				names = append(names, c.Name)
			}
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: [%s]", pod.Name, strings.Join(names, " ")))
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return name, nil
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return name, nil
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// authenticate asks the apiserver who the caller is (a SelfSubjectReview made with the
// caller's own credentials); a rejection (401) is passed through as the apiserver wrote it.
func (n *Node) authenticate(w http.ResponseWriter, req *http.Request) (authnv1.UserInfo, bool) {
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	r, err := http.NewRequestWithContext(req.Context(), http.MethodPost, n.api.URL+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewReader(body))
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return authnv1.UserInfo{}, false
	}
	for k, vs := range req.Header {
		if k == "Authorization" || strings.HasPrefix(k, "Impersonate-") {
			r.Header[k] = vs
		}
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	resp, err := n.upstream.Do(r)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("authenticate the exec request: %w", err)))
		return authnv1.UserInfo{}, false
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("authenticate the exec request: %w", err)))
		return authnv1.UserInfo{}, false
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		if ct := resp.Header.Get("Content-Type"); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(data)
		return authnv1.UserInfo{}, false
	}
	var review authnv1.SelfSubjectReview
	if err := json.Unmarshal(data, &review); err != nil {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("decode the SelfSubjectReview: %w", err)))
		return authnv1.UserInfo{}, false
	}
	return review.Status.UserInfo, true
}

// authorize checks create on pods/exec for user with a SubjectAccessReview, and writes the
// apiserver's 403 when it is denied.
func (n *Node) authorize(w http.ResponseWriter, req *http.Request, user authnv1.UserInfo, ns, name string) bool {
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: ns, Verb: "create", Resource: "pods", Subresource: "exec", Name: name,
		},
	}}
	got, err := n.api.Client.AuthorizationV1().SubjectAccessReviews().Create(req.Context(), sar, metav1.CreateOptions{})
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("authorize the exec request: %w", err)))
		return false
	}
	if got.Status.Allowed {
		return true
	}
	msg := fmt.Sprintf("User %q cannot create resource \"pods/exec\" in API group \"\" in the namespace %q", user.Username, ns)
	if got.Status.Reason != "" {
		msg += ": " + got.Status.Reason
	}
	writeStatus(w, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, name, errors.New(msg)))
	return false
}

// writeStatus writes err as the apiserver writes errors: a metav1.Status in JSON with its code.
func writeStatus(w http.ResponseWriter, err error) {
	var status metav1.Status
	if s, ok := err.(apierrors.APIStatus); ok || errors.As(err, &s) {
		status = s.Status()
	} else {
		status = apierrors.NewInternalError(err).ErrStatus
	}
	status.Kind, status.APIVersion = "Status", "v1"
	if status.Code == 0 {
		status.Code = http.StatusInternalServerError
	}
	data, _ := json.Marshal(status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	w.Write(data)
}
