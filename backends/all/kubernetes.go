//go:build !no_kubernetes

package all

import "github.com/hermes-sandbox/hermes-sandbox/backends/kubernetes"

func newKubernetes(c cfg, o opts) (backend, error) { return kubernetes.New(c.Kubernetes, o) }
