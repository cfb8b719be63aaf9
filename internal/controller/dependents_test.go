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
	d := &dependentWatches{waiters: actionclient.NewWaiters(nil, func(k shard.Key) { woken = append(woken, k) }, nil)}
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

// An object that went before the resource blocked by it began to wait (its deletion event came
// first, and woke nobody) wakes the resource as the wait is set; one still there does not.
func TestAnObjectGoneBeforeTheWaitWakesAtOnce(t *testing.T) {
	var woken []shard.Key
	present := map[string]bool{"kept": true}
	w := actionclient.NewWaiters(nil, func(k shard.Key) { woken = append(woken, k) },
		func(t helmconfig.TakenError) bool { return present[t.Name] })
	blocked := func(name string) shard.Key {
		return shard.Key{NamespacedName: types.NamespacedName{Name: "waits-for-" + name}}
	}
	w.Observe(blocked("kept"), &helmconfig.TakenError{Kind: "ConfigMap", Name: "kept", Release: "other"})
	w.Observe(blocked("gone"), &helmconfig.TakenError{Kind: "ConfigMap", Name: "gone", Release: "other"})
	if len(woken) != 1 || woken[0] != blocked("gone") {
		t.Fatalf("woken %v, want only %v", woken, blocked("gone"))
	}
	w.ObjectGone("ConfigMap", "", "gone") // woken already: not waiting any more
	w.ObjectGone("ConfigMap", "", "kept")
	if len(woken) != 2 || woken[1] != blocked("kept") {
		t.Errorf("woken %v, want %v woken once, then %v", woken, blocked("gone"), blocked("kept"))
	}
}
