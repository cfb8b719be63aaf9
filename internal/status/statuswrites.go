package status

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/myproxy-operator/internal/caches"
)

// ChangedBeyondStatusWrites returns an update filter for custom resources that passes an update
// only when it changed something besides what the status controller writes (own). Updates that
// did not are of no interest to any controller: without this filter each of the status
// controller's writes would make it run again, and the objects a failing install creates and
// rolls back would keep the two controllers triggering each other.
func ChangedBeyondStatusWrites(own Own) func(oldObj, newObj any) bool {
	written := own.Written()
	return func(oldObj, newObj any) bool {
		o, ok := oldObj.(*unstructured.Unstructured)
		if !ok {
			return true
		}
		n, ok := newObj.(*unstructured.Unstructured)
		if !ok {
			return true
		}
		return !caches.Equal(o.Object, n.Object, written)
	}
}
