package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

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
