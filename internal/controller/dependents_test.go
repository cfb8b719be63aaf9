package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A deleted release object wakes a resource at once unless its last reconcile failed: its
// retry comes at the queue's backoff. Creates wake nothing.
func TestDeletesBackOffOnlyWhileReconcilesFail(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Hour, time.Hour))
	defer q.ShutDown()
	healthy, failing := reconcile.Request{NamespacedName: types.NamespacedName{Name: "healthy"}}, reconcile.Request{NamespacedName: types.NamespacedName{Name: "failing"}}
	h := wakeOwners(func(o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	})
	object := func(name string) client.Object {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	q.AddRateLimited(failing) // a failed reconcile: back in an hour
	h.Create(context.Background(), event.CreateEvent{Object: object("created")}, q)
	h.Delete(context.Background(), event.DeleteEvent{Object: object("healthy")}, q)
	h.Delete(context.Background(), event.DeleteEvent{Object: object("failing")}, q)
	if q.Len() != 1 {
		t.Fatalf("%d requests ready, want the healthy one alone", q.Len())
	}
	if got, _ := q.Get(); got != healthy {
		t.Errorf("ready: %v, want %v", got, healthy)
	}
}
