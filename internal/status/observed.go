package status

import (
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/operator-framework/helm-operator-plugins/pkg/hook"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// wakeDelay is how long after a successful Helm action the status controller runs.
const wakeDelay = time.Second

// Observed remembers, per custom resource, the metadata.generation that the Helm reconciler
// last applied successfully; it becomes status.observedGeneration. It is filled by a post hook
// of the Helm reconciler, which runs after every successful install, upgrade or reconcile.
// After a restart it fills again: the reconciler reconciles every resource on start.
type Observed struct {
	mu          sync.Mutex
	generations map[types.UID]int64
	events      chan event.TypedGenericEvent[*unstructured.Unstructured]
}

// NewObserved returns an empty record.
func NewObserved() *Observed {
	return &Observed{
		generations: map[types.UID]int64{},
		events:      make(chan event.TypedGenericEvent[*unstructured.Unstructured], 1024),
	}
}

// PostHook records the applied generation and wakes the status controller.
func (o *Observed) PostHook() hook.PostHook {
	return hook.PostHookFunc(func(obj *unstructured.Unstructured, _ release.Release, _ logr.Logger) error {
		o.mu.Lock()
		changed := o.generations[obj.GetUID()] != obj.GetGeneration()
		o.generations[obj.GetUID()] = obj.GetGeneration()
		o.mu.Unlock()
		if changed {
			// Post hooks run just before the Helm reconciler writes its own status. Writing ours
			// now would make that write conflict, and the reconciler would retry only after its
			// backoff; waking a moment later lets it land first.
			copied := obj.DeepCopy()
			time.AfterFunc(wakeDelay, func() {
				select {
				case o.events <- event.TypedGenericEvent[*unstructured.Unstructured]{Object: copied}:
				default:
					// The queue is full; the status write that follows a change wakes the controller too.
				}
			})
		}
		return nil
	})
}

// Generation returns the last applied generation of a resource, if any.
func (o *Observed) Generation(uid types.UID) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.generations[uid]
	return g, ok
}

// Forget drops a deleted resource.
func (o *Observed) Forget(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.generations, uid)
}
