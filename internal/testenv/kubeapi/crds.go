package kubeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// crdResource is apiextensions.k8s.io/v1 customresourcedefinitions.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates every CustomResourceDefinition in the YAML files (*.yaml, *.yml) of dir
// and waits until each is Established. It is idempotent per process: a directory already
// installed returns at once, and a CRD that already exists is left as it is.
func (s *Server) InstallCRDs(t testing.TB, dir string) {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.crdMu.Lock()
	defer s.crdMu.Unlock()
	if s.crdDirs[abs] {
		return
	}
	crds, err := readCRDs(abs)
	if err != nil {
		t.Fatalf("kubeapi: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, crd := range crds {
		_, err := s.Dynamic.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("kubeapi: create CustomResourceDefinition %s: %v", crd.GetName(), err)
		}
	}
	for _, crd := range crds {
		if err := s.waitEstablished(ctx, crd.GetName()); err != nil {
			t.Fatalf("kubeapi: CustomResourceDefinition %s: %v", crd.GetName(), err)
		}
	}
	if s.crdDirs == nil {
		s.crdDirs = map[string]bool{}
	}
	s.crdDirs[abs] = true
}

// readCRDs decodes the CustomResourceDefinitions of every YAML document in dir's YAML files.
func readCRDs(dir string) ([]*unstructured.Unstructured, error) {
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	slices.Sort(files)
	var crds []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("decode %s: %w", f, err)
			}
			u := &unstructured.Unstructured{Object: obj}
			if obj == nil || u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			if u.GetAPIVersion() != "apiextensions.k8s.io/v1" {
				return nil, fmt.Errorf("%s: CustomResourceDefinition %s is %s; only apiextensions.k8s.io/v1 is served", f, u.GetName(), u.GetAPIVersion())
			}
			crds = append(crds, u)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition in the YAML files of %s", dir)
	}
	return crds, nil
}

// waitEstablished polls the CRD until its Established condition is True.
func (s *Server) waitEstablished(ctx context.Context, name string) error {
	var last string
	for {
		u, err := s.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
		} else {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			last = "no conditions yet"
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
				if m["type"] == "NamesAccepted" && m["status"] == "False" {
					return fmt.Errorf("names not accepted: %v", m["message"])
				}
				last = fmt.Sprintf("%v=%v (%v)", m["type"], m["status"], m["message"])
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not Established in time (last: %s)", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
