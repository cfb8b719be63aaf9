package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestSupportsOwnerReference(t *testing.T) {
	namespaced := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Namespaced"}
	cluster := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Cluster"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(namespaced, meta.RESTScopeNamespace)
	mapper.Add(cluster, meta.RESTScopeRoot)
	obj := func(gvk schema.GroupVersionKind, namespace string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(namespace)
		return u
	}
	tests := []struct {
		name             string
		owner, dependent *unstructured.Unstructured
		want             bool
	}{
		{name: "same namespace", owner: obj(namespaced, "a"), dependent: obj(namespaced, "a"), want: true},
		{name: "other namespace", owner: obj(namespaced, "a"), dependent: obj(namespaced, "b"), want: false},
		{name: "cluster-scoped dependent of a namespaced owner", owner: obj(namespaced, "a"), dependent: obj(cluster, ""), want: false},
		{name: "any dependent of a cluster-scoped owner", owner: obj(cluster, ""), dependent: obj(namespaced, "b"), want: true},
	}
	for _, tt := range tests {
		got, err := supportsOwnerReference(mapper, tt.owner, tt.dependent)
		if err != nil || got != tt.want {
			t.Errorf("%s: got %v (%v), want %v", tt.name, got, err, tt.want)
		}
	}
	if _, err := supportsOwnerReference(mapper, obj(namespaced, "a"), obj(schema.GroupVersionKind{Kind: "Unknown", Version: "v1"}, "a")); err == nil {
		t.Error("a kind the API does not serve: no error")
	}
}
