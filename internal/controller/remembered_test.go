package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/myproxy-operator/internal/shard"
)

// A resource is forgotten by the stores of its kind and by the shared ones, not by another
// kind's store that holds a resource of the same name.
func TestForgetReachesEveryStoreOfTheKind(t *testing.T) {
	a := schema.GroupVersionKind{Group: "g", Version: "v1", Kind: "A"}
	b := schema.GroupVersionKind{Group: "g", Version: "v1", Kind: "B"}
	nn := types.NamespacedName{Namespace: "ns", Name: "x"}
	held := map[string]map[types.NamespacedName]bool{}
	store := func(m string, gvk schema.GroupVersionKind) RememberedStore {
		held[m+gvk.Kind] = map[types.NamespacedName]bool{nn: true}
		return RememberedStore{Map: m, GVK: gvk, Forget: func(k shard.Key) { delete(held[m+gvk.Kind], k.NamespacedName) },
			Len: func() int { return len(held[m+gvk.Kind]) }}
	}
	r := newRemembered()
	r.Add(store("digests", a))
	r.Add(store("digests", b))
	r.Add(store("states", schema.GroupVersionKind{}))
	r.Add(RememberedStore{Map: "writes", Len: func() int { return 7 }}) // counted only
	if got := r.Sizes(); got["digests"] != 2 || got["states"] != 1 || got["writes"] != 7 {
		t.Fatalf("sizes %v", got)
	}
	r.Forget(shard.Key{GVK: a, NamespacedName: nn})
	if held["digestsA"][nn] || held["states"][nn] || !held["digestsB"][nn] {
		t.Errorf("after forgetting A %s: %v", nn, held)
	}
	if got := r.Sizes(); got["digests"] != 1 || got["states"] != 0 {
		t.Errorf("sizes %v", got)
	}
	r.Add(store("digests", a)) // a manager built again replaces its store
	if got := r.Sizes(); got["digests"] != 2 {
		t.Errorf("a store added twice counts twice: %v", got)
	}
}
