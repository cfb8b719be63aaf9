package chartrender

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// lookupRecorder is the offline renderings' cluster for `lookup`: it finds nothing, as Helm's
// engine without a cluster answers, and records the kinds a rendering looked up (whatever the
// template's spelling: literals, variables, values).
type lookupRecorder struct {
	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]bool
}

// GetClientFor implements engine.ClientProvider.
func (r *lookupRecorder) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	r.mu.Lock()
	if r.kinds == nil {
		r.kinds = map[schema.GroupVersionKind]bool{}
	}
	r.kinds[gvk] = true
	r.mu.Unlock()
	return nothingFound{resource: gvk.GroupVersion().WithResource(kind).GroupResource()}, true, nil
}

func (r *lookupRecorder) lookedUp() []schema.GroupVersionKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]schema.GroupVersionKind, 0, len(r.kinds))
	for gvk := range r.kinds {
		out = append(out, gvk)
	}
	return sortedDistinct(out)
}

// nothingFound answers every get and list NotFound, which `lookup` turns into an empty result.
type nothingFound struct {
	dynamic.NamespaceableResourceInterface // the methods lookup does not call
	resource                               schema.GroupResource
}

func (n nothingFound) Namespace(string) dynamic.ResourceInterface { return n }

func (n nothingFound) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	return nil, apierrors.NewNotFound(n.resource, name)
}

func (n nothingFound) List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return nil, apierrors.NewNotFound(n.resource, "")
}
