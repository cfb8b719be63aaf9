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

// A deleted release object wakes a resource at once unless its last reconcile failed: its retry
// comes at the queue's backoff, and anyone else's deletion (not this process's) wakes it at the
// next backoff. Creates wake nothing. A resource of another release that waits for the object
// is woken, whatever its backoff.
func TestDeletesBackOffOnlyWhileReconcilesFail(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Hour, time.Hour))
	defer q.ShutDown()
	healthy, failing := reconcile.Request{NamespacedName: types.NamespacedName{Name: "healthy"}}, reconcile.Request{NamespacedName: types.NamespacedName{Name: "failing"}}
	deletedByHand := reconcile.Request{NamespacedName: types.NamespacedName{Name: "failing, deleted by hand"}}
	var woken []shard.Key
	waiter := shard.Key{NamespacedName: types.NamespacedName{Name: "waiting"}}
	d := &dependentWatches{waiters: actionclient.NewWaiters(nil, func(k shard.Key) { woken = append(woken, k) }, nil),
		ownDelete: func(uid types.UID) bool { return uid == "own" }}
	d.waiters.Observe(waiter, &helmconfig.TakenError{Kind: "ConfigMap", Name: "failing", Release: "failing"})
	h := d.wakeOwners("ConfigMap", func(o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	})
	object := func(name string) client.Object {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "own"}}
	}
	q.AddRateLimited(failing) // failed reconciles: back in an hour
	q.AddRateLimited(deletedByHand)
	h.Create(context.Background(), event.CreateEvent{Object: object("created")}, q)
	h.Delete(context.Background(), event.DeleteEvent{Object: object("healthy")}, q)
	h.Delete(context.Background(), event.DeleteEvent{Object: object("failing")}, q)
	byHand := object(deletedByHand.Name)
	byHand.SetUID("another's")
	h.Delete(context.Background(), event.DeleteEvent{Object: byHand}, q)
	if q.Len() != 1 {
		t.Fatalf("%d requests ready, want the healthy one alone", q.Len())
	}
	if got, _ := q.Get(); got != healthy {
		t.Errorf("ready: %v, want %v", got, healthy)
	}
	if q.NumRequeues(failing) != 1 || q.NumRequeues(deletedByHand) != 2 {
		t.Errorf("backoffs: %d for the failing resource, %d for the one deleted by hand; want 1 (its retry) and 2 (woken at the next)",
			q.NumRequeues(failing), q.NumRequeues(deletedByHand))
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

// An object deleted by hand while the retry of its resource's failed reconcile runs (having read
// the object before it went) wakes the resource again after that retry: the deletion is not left
// to a retry that has already read.
func TestADeletionDuringARetryIsNotLost(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Millisecond, time.Millisecond))
	defer q.ShutDown()
	h := (&dependentWatches{ownDelete: func(types.UID) bool { return false }}).wakeOwners("ConfigMap",
		func(o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
		})
	q.AddRateLimited(reconcile.Request{NamespacedName: types.NamespacedName{Name: "retried"}}) // a failed reconcile
	r, _ := q.Get()                                                                            // its retry runs
	h.Delete(context.Background(), event.DeleteEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "retried"}}}, q)
	q.Forget(r) // the retry succeeds
	q.Done(r)
	got := make(chan reconcile.Request, 1)
	go func() { again, _ := q.Get(); got <- again }()
	select {
	case again := <-got:
		if again != r {
			t.Errorf("woken: %v, want %v", again, r)
		}
	case <-time.After(10 * time.Second):
		t.Error("the deletion during the retry woke nothing")
	}
}
