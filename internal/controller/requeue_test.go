package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// setup stands for the plugins' controller: it starts each watched source with its queue.
type setup struct {
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
}

func (s setup) Watch(src source.Source) error { return src.Start(context.Background(), s.queue) }

func TestQueuesReachTheReconcilersQueue(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"}
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	q := NewQueues()
	q.Add(gvk, key) // before the controller started: nothing to do, and no panic

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	if err := q.Register(gvk)(setup{queue: queue}); err != nil {
		t.Fatal(err)
	}
	if queue.Len() != 0 {
		t.Fatalf("an Add before the start reached the queue")
	}
	q.Add(gvk, key)
	if got, _ := queue.Get(); got.NamespacedName != key {
		t.Fatalf("queued %v, want %v", got, key)
	}
	queue.Done(reconcile.Request{NamespacedName: key})

	start := time.Now()
	q.AddAfter(gvk, key, 100*time.Millisecond)
	if got, _ := queue.Get(); got.NamespacedName != key || time.Since(start) < 100*time.Millisecond {
		t.Errorf("AddAfter: got %v after %s, want %v after 100ms", got, time.Since(start), key)
	}
	q.Add(schema.GroupVersionKind{Kind: "Other"}, key) // another kind's queue is not this one
	if queue.Len() != 0 {
		t.Errorf("an Add for another kind reached this queue")
	}
}
