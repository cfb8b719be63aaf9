package status

import (
	"sync"
	"time"

	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// AppliedGenerations remembers, per custom resource, the metadata.generation that the Helm reconciler
// last applied successfully, which becomes status.observedGeneration, and the objects of the
// release it applied (in Manifests). It is filled by a post hook of the Helm reconciler, which
// runs after every successful install, upgrade or reconcile, before the reconciler writes its
// Deployed condition. After a restart it fills again: the reconciler reconciles every resource
// on start.
type AppliedGenerations struct {
	mu          sync.Mutex
	generations map[types.NamespacedName]applied
	// events wake the status controller: the resources some time after each successful Helm
	// action on them, and those nudged (Reconciler.Nudge).
	events chan event.TypedGenericEvent[*unstructured.Unstructured]
	// Manifests are the objects of each applied release; namespaced tells their scope.
	Manifests  *ManifestRefs
	namespaced func(schema.GroupVersionKind) bool
}

// applied is a generation applied to one incarnation (UID) of a resource: a resource deleted
// and created again under its name starts afresh.
type applied struct {
	uid        types.UID
	generation int64
}

// NewAppliedGenerations returns an empty record; namespaced tells the scope of a kind.
func NewAppliedGenerations(namespaced func(schema.GroupVersionKind) bool) *AppliedGenerations {
	return &AppliedGenerations{
		generations: map[types.NamespacedName]applied{},
		events:      make(chan event.TypedGenericEvent[*unstructured.Unstructured], 1024),
		Manifests:   NewManifestRefs(),
		namespaced:  namespaced,
	}
}

// Applied records the applied generation and the release's objects, and wakes the status
// controller when either changed: a post hook of the Helm reconciler.
func (o *AppliedGenerations) Applied(obj *unstructured.Unstructured, rel *release.Release) error {
	key, now := client.ObjectKeyFromObject(obj), applied{uid: obj.GetUID(), generation: obj.GetGeneration()}
	objectsChanged, err := o.Manifests.Learn(key, rel.Manifest, o.namespaced)
	if err != nil {
		return err
	}
	o.mu.Lock()
	changed := o.generations[key] != now || objectsChanged
	o.generations[key] = now
	o.mu.Unlock()
	if changed {
		// After the updater's write, which carries most of it (see wakeDelay).
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
}

// Generation returns the last applied generation of a resource, if any.
func (o *AppliedGenerations) Generation(key types.NamespacedName, uid types.UID) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.generations[key]
	return a.generation, ok && a.uid == uid
}

// Forget drops a resource that is being deleted or gone.
func (o *AppliedGenerations) Forget(key types.NamespacedName) {
	o.mu.Lock()
	delete(o.generations, key)
	o.mu.Unlock()
	o.Manifests.Forget(key)
}

// Len returns the number of resources remembered.
func (o *AppliedGenerations) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.generations)
}
