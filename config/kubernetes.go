package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Toleration is one parsed kubernetes.tolerations entry.
type Toleration struct {
	Key      string // "" with Operator Exists tolerates every taint
	Operator string // Equal or Exists
	Value    string
	Effect   string // NoSchedule, PreferNoSchedule, NoExecute or "" (any)
}

var taintEffects = []string{"", "NoSchedule", "PreferNoSchedule", "NoExecute"}

// ParseToleration parses "key[=value]:Effect", "key[=value]" (any effect) or "*" (every taint),
// the spelling of `kubectl taint`.
func ParseToleration(s string) (Toleration, error) {
	if s == "*" {
		return Toleration{Operator: "Exists"}, nil
	}
	kv, effect, _ := strings.Cut(s, ":")
	key, value, hasValue := strings.Cut(kv, "=")
	if !qualifiedName.MatchString(key) {
		return Toleration{}, fmt.Errorf("%q: the key %q is not a label key such as example.com/gpu", s, key)
	}
	ok := false
	for _, e := range taintEffects {
		ok = ok || e == effect
	}
	if !ok {
		return Toleration{}, fmt.Errorf("%q: effect %q must be NoSchedule, PreferNoSchedule or NoExecute", s, effect)
	}
	t := Toleration{Key: key, Operator: "Exists", Effect: effect}
	if hasValue {
		if value != "" && !labelValue.MatchString(value) {
			return Toleration{}, fmt.Errorf("%q: the value %q is not a label value", s, value)
		}
		t.Operator, t.Value = "Equal", value
	}
	return t, nil
}

var (
	// qualifiedName is a label key: an optional DNS-subdomain prefix and a name.
	qualifiedName = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelValue    = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	dnsLabel      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsSubdomain  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
)

// MaxKubernetesPool bounds kubernetes.pool_size.
const MaxKubernetesPool = 64

func (v *validator) kubernetes(k *KubernetesConfig) {
	if strings.TrimSpace(k.Image) == "" {
		v.failf("kubernetes.image", "must not be empty")
	}
	if k.Namespace != "" && !dnsLabel.MatchString(k.Namespace) {
		v.failf("kubernetes.namespace", "%q is not a namespace name (lower-case letters, digits and -, at most 63)", k.Namespace)
	}
	if k.RuntimeClass != "" && !dnsSubdomain.MatchString(k.RuntimeClass) {
		v.failf("kubernetes.runtime_class", "%q is not a RuntimeClass name", k.RuntimeClass)
	}
	if k.CPU < 0 {
		v.failf("kubernetes.cpu", "must not be negative, got %s", formatFloat(k.CPU))
	}
	v.nonNegative("kubernetes.memory", int64(k.Memory))
	v.nonNegative("kubernetes.ephemeral_storage", int64(k.EphemeralStorage))
	if k.WorkspaceSize < 4*Mebibyte {
		v.failf("kubernetes.workspace_size", "must be at least 4MiB (the helper lives there), got %s", k.WorkspaceSize)
	}
	if k.RunAsUser <= 0 {
		v.failf("kubernetes.run_as_user", "must be a non-zero uid (the restricted Pod Security profile refuses root), got %d", k.RunAsUser)
	}
	if k.MaxLifetime < time.Minute {
		v.failf("kubernetes.max_lifetime", "must be at least 1m (it is the pod's activeDeadlineSeconds), got %s", FormatDuration(k.MaxLifetime))
	}
	if k.MaxLifetime%time.Second != 0 {
		v.failf("kubernetes.max_lifetime", "Kubernetes counts whole seconds, got %s", FormatDuration(k.MaxLifetime))
	}
	v.positive("kubernetes.start_timeout", k.StartTimeout)
	if k.PoolSize < 0 || k.PoolSize > MaxKubernetesPool {
		v.failf("kubernetes.pool_size", "must be between 0 and %d, got %d", MaxKubernetesPool, k.PoolSize)
	}
	if !k.Mode.Valid() {
		_, err := ParseKubernetesMode(string(k.Mode))
		v.failf("kubernetes.mode", "%v", err)
	}
	for key, val := range k.NodeSelector {
		if !qualifiedName.MatchString(key) || (val != "" && !labelValue.MatchString(val)) {
			v.failf("kubernetes.node_selector", "%s=%s is not a label such as kubernetes.io/arch=amd64", key, val)
		}
	}
	for _, t := range k.Tolerations {
		if _, err := ParseToleration(t); err != nil {
			v.failf("kubernetes.tolerations", "%v", err)
		}
	}
}
