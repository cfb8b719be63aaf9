package caches

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Go type the manager's cache holds the objects of a release in: kinds the scheme knows
// (Deployments, Services, ConfigMaps...) as their typed structs, other kinds as unstructured
// objects. The objects of a fleet's releases are most of what the operator holds in memory, and
// nested maps take about twice the memory of the same object as a struct. Every watch of release
// objects must ask ReleaseObject for its object, so that one kind has one informer.

// ReleaseObject returns an empty object of the kind, in the type the cache holds it in.
func ReleaseObject(scheme *runtime.Scheme, gvk schema.GroupVersionKind) client.Object {
	if o, err := scheme.New(gvk); err == nil {
		if obj, ok := o.(client.Object); ok {
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			return obj
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// Content returns the object as the nested maps of its JSON form, with its apiVersion and kind
// (objects read from a cache of typed objects may have none). An unstructured object's own
// content is returned, not a copy: callers only read it.
func Content(obj client.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		return u.UnstructuredContent(), nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return m, nil
}
