package kubetest

// The pod → docker container translation, field by field as a kubelet with a CRI runtime
// applies it. What is not translated: volumes other than emptyDir (the service account token,
// configMap, secret, PVC, ... mounts are absent), probes, lifecycle hooks, init and sidecar
// containers, every container but the first, restarts, and DNS (the engine's default
// resolv.conf). NetworkPolicy is enforced only as deny-all egress (see denyAllEgress).

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/mount"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// configError is a spec the kubelet refuses before creating the container
// (CreateContainerConfigError); msg is the kubelet's message.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

type containerSpec struct {
	name   string
	config *container.Config
	host   *container.HostConfig
}

// containerSpec translates pod's container c (run from img) into a docker container.
func (n *Node) containerSpec(ctx context.Context, pod *corev1.Pod, c *corev1.Container, img image.InspectResponse) (*containerSpec, error) {
	env, err := n.env(ctx, pod, c)
	if err != nil {
		return nil, err
	}
	lookup := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		lookup[k] = v
	}
	cfg := &container.Config{
		Image:      c.Image,
		Env:        env,
		WorkingDir: c.WorkingDir,
		Hostname:   pod.Name,
		Tty:        c.TTY,
		OpenStdin:  c.Stdin,
		StdinOnce:  c.StdinOnce,
		Labels: map[string]string{
			n.opts.Label:   n.opts.Value,
			labelInstance:  n.instance,
			labelNamespace: pod.Namespace,
			labelPod:       pod.Name,
			labelUID:       string(pod.UID),
			labelContainer: c.Name,
		},
	}
	if pod.Spec.Hostname != "" {
		cfg.Hostname = pod.Spec.Hostname
	}
	// Kubernetes: command replaces the entrypoint (and drops the image's cmd), args replace
	// the cmd; both expand $(VAR) from the container's environment. An empty list is unset.
	if len(c.Command) > 0 {
		cfg.Entrypoint = expandAll(c.Command, lookup)
	}
	if len(c.Args) > 0 {
		cfg.Cmd = expandAll(c.Args, lookup)
	}

	host := &container.HostConfig{NetworkMode: "bridge"}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	user, err := dockerUser(pod, c, psc, csc, img)
	if err != nil {
		return nil, err
	}
	cfg.User = user
	if psc.FSGroup != nil {
		host.GroupAdd = append(host.GroupAdd, strconv.FormatInt(*psc.FSGroup, 10))
	}
	for _, g := range psc.SupplementalGroups {
		host.GroupAdd = append(host.GroupAdd, strconv.FormatInt(g, 10))
	}
	if len(psc.Sysctls) > 0 {
		host.Sysctls = map[string]string{}
		for _, s := range psc.Sysctls {
			host.Sysctls[s.Name] = s.Value
		}
	}
	if csc.Privileged != nil && *csc.Privileged {
		host.Privileged = true
	}
	if csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem {
		host.ReadonlyRootfs = true
	}
	if csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation {
		host.SecurityOpt = append(host.SecurityOpt, "no-new-privileges")
	}
	if caps := csc.Capabilities; caps != nil {
		for _, cp := range caps.Add {
			host.CapAdd = append(host.CapAdd, string(cp))
		}
		for _, cp := range caps.Drop {
			host.CapDrop = append(host.CapDrop, string(cp))
		}
	}
	seccomp := psc.SeccompProfile
	if csc.SeccompProfile != nil {
		seccomp = csc.SeccompProfile
	}
	switch {
	case host.Privileged:
	case seccomp == nil || seccomp.Type == corev1.SeccompProfileTypeUnconfined:
		// The kubelet's default (without --seccomp-default) is Unconfined.
		host.SecurityOpt = append(host.SecurityOpt, "seccomp=unconfined")
	case seccomp.Type == corev1.SeccompProfileTypeRuntimeDefault:
		// docker's default profile
	default:
		return nil, &configError{fmt.Sprintf("seccomp profile type %q is not supported by kubetest", seccomp.Type)}
	}

	if lim := c.Resources.Limits; lim != nil {
		if cpu, ok := lim[corev1.ResourceCPU]; ok {
			host.NanoCPUs = cpu.MilliValue() * 1_000_000
		}
		if mem, ok := lim[corev1.ResourceMemory]; ok {
			host.Memory = mem.Value()
			host.MemorySwap = host.Memory // no swap, as on a kubelet
		}
	}
	if req, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		host.CPUShares = max(2, req.MilliValue()*1024/1000)
	}

	volumes := map[string]*corev1.Volume{}
	for i := range pod.Spec.Volumes {
		volumes[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	for _, vm := range c.VolumeMounts {
		v := volumes[vm.Name]
		if v == nil || v.EmptyDir == nil {
			continue
		}
		// A local volume of type tmpfs rather than a tmpfs mount: docker 20.10 mounts the
		// latter noexec and copies the image directory's mode over it, where an emptyDir is an
		// exec-able 0777 directory. NoCopy: an emptyDir starts empty.
		o := "mode=1777"
		if v.EmptyDir.SizeLimit != nil {
			o += ",size=" + strconv.FormatInt(v.EmptyDir.SizeLimit.Value(), 10)
		} else if v.EmptyDir.Medium == corev1.StorageMediumMemory && host.Memory > 0 {
			o += ",size=" + strconv.FormatInt(host.Memory, 10)
		}
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeVolume, Target: vm.MountPath, ReadOnly: vm.ReadOnly,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true, Labels: map[string]string{n.opts.Label: n.opts.Value, labelInstance: n.instance},
				DriverConfig: &mount.Driver{Name: "local", Options: map[string]string{"type": "tmpfs", "device": "tmpfs", "o": o}}}})
	}

	switch deny, err := n.denyAllEgress(ctx, pod); {
	case err != nil:
		return nil, err
	case pod.Spec.HostNetwork:
		host.NetworkMode = "host"
		cfg.Hostname = ""
	case deny:
		host.NetworkMode = "none"
		cfg.NetworkDisabled = true
	}
	name := fmt.Sprintf("k8s_%s_%s_%s_%s_0", c.Name, pod.Name, pod.Namespace, pod.UID)
	return &containerSpec{name: name, config: cfg, host: host}, nil
}

// dockerUser is the docker User for the container: runAsUser/runAsGroup (the container's over
// the pod's) else the image's user, checked against runAsNonRoot as the kubelet checks it.
func dockerUser(pod *corev1.Pod, c *corev1.Container, psc *corev1.PodSecurityContext, csc *corev1.SecurityContext, img image.InspectResponse) (string, error) {
	uid, gid, nonRoot := psc.RunAsUser, psc.RunAsGroup, psc.RunAsNonRoot
	if csc.RunAsUser != nil {
		uid = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		gid = csc.RunAsGroup
	}
	if csc.RunAsNonRoot != nil {
		nonRoot = csc.RunAsNonRoot
	}
	imageUser := ""
	if img.Config != nil {
		imageUser = img.Config.User
	}
	user := imageUser
	if uid != nil {
		user = strconv.FormatInt(*uid, 10)
	}
	if gid != nil {
		name, _, _ := strings.Cut(user, ":")
		if name == "" {
			name = "0"
		}
		user = name + ":" + strconv.FormatInt(*gid, 10)
	}
	if nonRoot != nil && *nonRoot {
		name, _, _ := strings.Cut(user, ":")
		switch id, err := strconv.ParseInt(name, 10, 64); {
		case name == "" || (err == nil && id == 0):
			return "", &configError{fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", pod.Namespace+"/"+pod.Name, c.Name)}
		case err != nil:
			return "", &configError{fmt.Sprintf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is "+
				"non-root (pod: %q, container: %s)", name, pod.Namespace+"/"+pod.Name, c.Name)}
		}
	}
	return user, nil
}

// env is the container's environment: env and envFrom with their references resolved
// (fieldRef, configMapKeyRef, secretKeyRef), $(VAR) expanded from earlier entries.
func (n *Node) env(ctx context.Context, pod *corev1.Pod, c *corev1.Container) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	core := n.api.Client.CoreV1()
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := core.ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
					continue
				}
				return nil, &configError{fmt.Sprintf("configmap %q not found", from.ConfigMapRef.Name)}
			}
			for k, v := range cm.Data {
				set(from.Prefix+k, v)
			}
		case from.SecretRef != nil:
			sec, err := core.Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if from.SecretRef.Optional != nil && *from.SecretRef.Optional {
					continue
				}
				return nil, &configError{fmt.Sprintf("secret %q not found", from.SecretRef.Name)}
			}
			for k, v := range sec.Data {
				set(from.Prefix+k, string(v))
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		switch src := e.ValueFrom; {
		case src.FieldRef != nil:
			v, err := fieldValue(pod, src.FieldRef.FieldPath)
			if err != nil {
				return nil, err
			}
			set(e.Name, v)
		case src.ConfigMapKeyRef != nil:
			ref := src.ConfigMapKeyRef
			cm, err := core.ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			v, ok := "", false
			if err == nil {
				v, ok = cm.Data[ref.Key]
			}
			if !ok {
				if ref.Optional != nil && *ref.Optional {
					continue
				}
				return nil, &configError{fmt.Sprintf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)}
			}
			set(e.Name, v)
		case src.SecretKeyRef != nil:
			ref := src.SecretKeyRef
			sec, err := core.Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			var v []byte
			ok := false
			if err == nil {
				v, ok = sec.Data[ref.Key]
			}
			if !ok {
				if ref.Optional != nil && *ref.Optional {
					continue
				}
				return nil, &configError{fmt.Sprintf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)}
			}
			set(e.Name, string(v))
		default:
			return nil, &configError{fmt.Sprintf("env %s: this valueFrom is not supported by kubetest", e.Name)}
		}
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, nil
}

// fieldValue resolves a downward-API fieldRef known before the container starts.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return "127.0.0.1", nil
	}
	if k, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(k, "']")], nil
	}
	if k, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return pod.Annotations[strings.TrimSuffix(k, "']")], nil
	}
	return "", &configError{fmt.Sprintf("fieldRef %s is not supported by kubetest", path)}
}

func expandAll(in []string, vars map[string]string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, vars)
	}
	return out
}

// expand replaces $(VAR) with its value when VAR is defined (left as is otherwise) and $$ with
// $, as the kubelet does for env values, command and args.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// denyAllEgress reports whether the NetworkPolicies of the pod's namespace deny it all egress,
// as a CNI enforcing them would: at least one policy of type Egress selects the pod and none
// of those has an egress rule. (Partial egress rules are not enforced: the pod gets the bridge.)
// The decision is made when the container is created.
func (n *Node) denyAllEgress(ctx context.Context, pod *corev1.Pod) (bool, error) {
	list, err := n.api.Client.NetworkingV1().NetworkPolicies(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list the NetworkPolicies of %s: %w", pod.Namespace, err)
	}
	selected := false
	for _, np := range list.Items {
		egress := false
		for _, t := range np.Spec.PolicyTypes {
			if t == networkingv1.PolicyTypeEgress {
				egress = true
			}
		}
		if !egress {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if len(np.Spec.Egress) > 0 {
			return false, nil
		}
		selected = true
	}
	return selected, nil
}
