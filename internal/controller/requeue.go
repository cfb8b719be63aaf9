// Queues lets code outside a reconciler put custom resources into that reconciler's
// work queue: to reconcile one again after a period, or at once because something its release
// depends on changed. helm-operator-plugins offers no handle on its controller's queue; a
// source added through its controller setup seam is handed the queue when the controller
// starts, and Queues keeps it.

package controller

import (
	"context"
	"sync"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Queues holds the work queue of each kind's reconciler.
type Queues struct {
	mu     sync.Mutex
	queues map[schema.GroupVersionKind]workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// NewQueues returns an empty set of queues.
func NewQueues() *Queues {
	return &Queues{queues: map[schema.GroupVersionKind]workqueue.TypedRateLimitingInterface[reconcile.Request]{}}
}

// Register returns the controller setup function that hands Queues the queue of gvk's
// reconciler once it starts.
func (q *Queues) Register(gvk schema.GroupVersionKind) reconciler.ControllerSetupFunc {
	return func(c reconciler.ControllerSetup) error {
		return c.Watch(source.Func(func(_ context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.mu.Lock()
			q.queues[gvk] = queue
			q.mu.Unlock()
			return nil
		}))
	}
}

// Add queues a custom resource now. Before its reconciler started, nothing needs it: the start
// lists every custom resource anyway.
func (q *Queues) Add(gvk schema.GroupVersionKind, key types.NamespacedName) {
	q.AddAfter(gvk, key, 0)
}

// AddAfter queues a custom resource after d. The queue keeps the earliest of several delays.
func (q *Queues) AddAfter(gvk schema.GroupVersionKind, key types.NamespacedName, d time.Duration) {
	q.mu.Lock()
	queue := q.queues[gvk]
	q.mu.Unlock()
	if queue == nil {
		return
	}
	if d <= 0 {
		queue.Add(reconcile.Request{NamespacedName: key})
		return
	}
	queue.AddAfter(reconcile.Request{NamespacedName: key}, d)
}
