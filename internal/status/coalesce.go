package status

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// coalesced delays every request the handler enqueues by coalesceDelay; the queue holds one
// entry per resource, so the events of that window share one reconcile.
func coalesced(h handler.EventHandler) handler.EventHandler { return coalescing{h} }

type coalescing struct{ handler.EventHandler }

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (c coalescing) Create(ctx context.Context, e event.CreateEvent, q requestQueue) {
	c.EventHandler.Create(ctx, e, delayed{q})
}

func (c coalescing) Update(ctx context.Context, e event.UpdateEvent, q requestQueue) {
	c.EventHandler.Update(ctx, e, delayed{q})
}

func (c coalescing) Delete(ctx context.Context, e event.DeleteEvent, q requestQueue) {
	c.EventHandler.Delete(ctx, e, delayed{q})
}

func (c coalescing) Generic(ctx context.Context, e event.GenericEvent, q requestQueue) {
	c.EventHandler.Generic(ctx, e, delayed{q})
}

// delayed turns Add into AddAfter.
type delayed struct{ requestQueue }

func (d delayed) Add(r reconcile.Request) { d.AddAfter(r, coalesceDelay) }
