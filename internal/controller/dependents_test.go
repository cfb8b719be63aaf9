package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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

// A deleted release object wakes a resource at once unless its last reconcile failed: its
// retry comes at the queue's backoff.
func TestDeletesBackOffOnlyWhileReconcilesFail(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Hour, time.Hour))
	defer q.ShutDown()
	healthy, failing := reconcile.Request{NamespacedName: types.NamespacedName{Name: "healthy"}}, reconcile.Request{NamespacedName: types.NamespacedName{Name: "failing"}}
	q.AddRateLimited(failing) // a failed reconcile: back in an hour
	unlessRetrying{q}.Add(healthy)
	unlessRetrying{q}.Add(failing)
	if q.Len() != 1 {
		t.Fatalf("%d requests ready, want the healthy one alone", q.Len())
	}
	if got, _ := q.Get(); got != healthy {
		t.Errorf("ready: %v, want %v", got, healthy)
	}
}
