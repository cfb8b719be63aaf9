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

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/shard"
)

// A deleted release object wakes a resource at once unless its last reconcile failed: its
// retry comes at the queue's backoff. Creates wake nothing. A resource of another release that
// waits for the object is woken, whatever its backoff.
func TestDeletesBackOffOnlyWhileReconcilesFail(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Hour, time.Hour))
	defer q.ShutDown()
	healthy, failing := reconcile.Request{NamespacedName: types.NamespacedName{Name: "healthy"}}, reconcile.Request{NamespacedName: types.NamespacedName{Name: "failing"}}
	var woken []shard.Key
	waiter := shard.Key{NamespacedName: types.NamespacedName{Name: "waiting"}}
	d := &dependentWatches{waiters: actionclient.NewWaiters(nil, func(k shard.Key) { woken = append(woken, k) })}
	d.waiters.Observe(waiter, &helmconfig.TakenError{Kind: "ConfigMap", Name: "failing", Release: "failing"})
	h := d.wakeOwners("ConfigMap", func(o client.Object) []reconcile.Request {
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
	if len(woken) != 1 || woken[0] != waiter {
		t.Errorf("woken %v, want the resource that waited for ConfigMap failing", woken)
	}
}
