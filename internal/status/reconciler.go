package status

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
)

// Reconciler writes the part of a custom resource's status that the Helm reconciler does
// not own: the fields and conditions its chart declares (kind.yaml, see internal/chartapi),
// evaluated over the live objects of the release; the Ready condition every kind gets (the
// kstatus rules over every release object); and observedGeneration (AppliedGenerations).
//
// It is a controller of its own because what it writes follows the live objects of a release,
// which change without a reconcile (a Deployment becoming available). The other writer is
// helm-operator-plugins' status updater, which writes status as {conditions, deployedRelease}
// at the end of its reconciles; through PluginWrites those writes keep this controller's fields
// and carry what it would write next (Fill), and where that cannot apply (the cache at another
// version) this controller puts them back on the next event. It never changes the Helm
// reconciler's own conditions.
type Reconciler struct {
	client.Client
	GVK schema.GroupVersionKind
	// Declaration is the chart's compiled kind.yaml.
	Declaration *chartapi.Compiled
	Applied     *AppliedGenerations
	// MaxConcurrentReconciles is the number of workers (at least 1): a converging fleet's
	// status must not lag behind its Deployments.
	MaxConcurrentReconciles int
	// Gone is told of a resource found deleted, so that every store of what is remembered of
	// it forgets it (controller.Remembered; an uninstall forgets some already, but a resource can
	// also go without one).
	Gone func(types.NamespacedName)
	// Shard is the part of the fleet this process owns: it writes the status of no other's.
	Shard shard.Shard
	// Namespaces are the namespaces the operator's caches hold (nil: all). An object of a
	// release outside them (where watches.yaml's reach lets a chart write) cannot be followed:
	// Ready names it instead of reading it.
	Namespaces map[string]cache.Config
	// Held, when set, tells which resources a halted rollout holds back, and why: they carry
	// the RolloutHeld condition until the hold ends (package rollout).
	Held func(types.NamespacedName) (string, bool)

	sharded    bool        // Shard.Sharded(), read once: unsharded, no reconcile calls into package shard
	objects    cache.Cache // the manager's cache, unfiltered
	controller controller.Controller
	owned      handler.EventHandler
	watched    sync.Map // schema.GroupVersionKind -> struct{}: kinds whose changes wake this controller
}

// Nudge has the controller compute a resource's status again, as a change of it would; it
// shares the queue of Applied's wake-ups, and blocks while that is full.
func (r *Reconciler) Nudge(key types.NamespacedName) {
	u := &unstructured.Unstructured{} // the queue reads only its namespace and name
	u.SetNamespace(key.Namespace)
	u.SetName(key.Name)
	r.Applied.events <- event.TypedGenericEvent[*unstructured.Unstructured]{Object: u}
}

// SetupWithManager registers the controller: it runs when the custom resource, an object of its
// release, or the Helm reconciler's progress (Applied: the generations it has applied) changes. selector limits it to the
// resources the Helm reconciler takes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, selector metav1.LabelSelector) error {
	r.sharded = r.Shard.Sharded()
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(r.GVK)
	// The manager's cache hides status-only changes of the custom resources and of the objects
	// of their releases (they must not wake the Helm reconciler), and this controller follows
	// exactly those. So it watches the same informers unfiltered, ignoring only its own writes.
	selected, err := predicate.LabelSelectorPredicate(selector) // an empty selector takes every resource
	if err != nil {
		return err
	}
	r.objects = caches.Unfiltered(mgr.GetCache())
	namespaced, err := apiutil.IsGVKNamespaced(r.GVK, mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	r.owned = coalescing(caches.OwnerRequests(r.GVK.GroupKind(), namespaced, false))
	itself := func(o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	}
	r.controller, err = ctrl.NewControllerManagedBy(mgr).
		Named(fmt.Sprintf("%s-status", r.GVK.Kind)).
		WatchesRawSource(source.Kind[client.Object](r.objects, owner, coalescing(itself), selected, ChangedBeyondStatusWrites(r.Declaration.Kind.Status))).
		WatchesRawSource(source.Channel(r.Applied.events, &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.MaxConcurrentReconciles)}).
		Build(r)
	return err
}

// watch makes changes of a kind's objects wake this controller, from the first release that
// has one: which kinds a release creates depends on its values, and a kind no release has
// needs no informer.
func (r *Reconciler) watch(gvk schema.GroupVersionKind) error {
	if _, done := r.watched.LoadOrStore(gvk, struct{}{}); done {
		return nil
	}
	if err := r.controller.Watch(source.Kind(r.objects, caches.ReleaseObject(r.Scheme(), gvk), r.owned)); err != nil {
		r.watched.Delete(gvk)
		return err
	}
	return nil
}

// Reconcile recomputes the status and patches what changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.GVK)
	switch err := r.Get(ctx, req.NamespacedName, obj); {
	case apierrors.IsNotFound(err):
		r.Applied.Forget(req.NamespacedName)
		r.Gone(req.NamespacedName)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, err
	case obj.GetDeletionTimestamp() != nil:
		r.Applied.Forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	current, desired, err := r.desired(ctx, obj)
	if desired == nil || err != nil {
		return ctrl.Result{}, err
	}
	// Only the fields that changed are sent, with the resourceVersion as an optimistic lock: it
	// keeps a concurrent write of the Helm reconciler's conditions from being overwritten; on
	// conflict the request comes back.
	changed, err := statusPatch(current, desired)
	if err != nil || changed == nil {
		return ctrl.Result{}, err
	}
	patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"status":%s}`, obj.GetResourceVersion(), changed)
	if err = r.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// Fill brings u's status (about to be written by helm-operator-plugins' updater, see
// PluginWrites) up to date with what Reconcile would write, so that one write carries both;
// it leaves u as it is where Reconcile would write nothing or cannot tell yet.
func (r *Reconciler) Fill(ctx context.Context, u *unstructured.Unstructured) {
	if r.controller == nil || u.GetDeletionTimestamp() != nil {
		return // not set up (no reconcile runs then), or going
	}
	if _, desired, err := r.desired(ctx, u); err == nil && desired != nil {
		u.Object["status"] = desired
	}
}

// desired returns obj's status as stored (current) and as this controller would have it, or a
// nil desired where it must not write: another shard's resource, one the Helm reconciler has not
// reached, or a release whose objects this process does not know yet.
func (r *Reconciler) desired(ctx context.Context, obj *unstructured.Unstructured) (current, desired map[string]any, err error) {
	if r.sharded && r.Shard.ClaimedByOther(obj) {
		return nil, nil, nil // that shard writes its status
	}
	current, _, _ = unstructured.NestedMap(obj.Object, "status")
	if _, ok := current[names.StatusConditions]; !ok {
		// The Helm reconciler has not reached it yet. Writing now would only make its first
		// update (the finalizer) conflict; its first status write brings us back.
		return current, nil, nil
	}
	key := client.ObjectKeyFromObject(obj)
	// Objects count only while the release is deployed: a failing install creates objects and
	// removes them again on rollback, and following that churn would only race the Helm
	// reconciler's own status writes.
	isDeployed := Deployed(current)
	var objects []ReleaseObject
	if isDeployed {
		var known bool
		if objects, known, err = r.releaseObjects(ctx, key); err != nil || !known {
			// Not known: deployed before this process started (or by another shard), and not
			// reconciled here since; the Helm reconciler's post hook, which runs once every object
			// of the release carries this shard's label, brings us back: on start the reconciler
			// reconciles every resource, and a resource handed over is reconciled by its claim.
			return current, nil, err
		}
	}
	evaluated := r.Declaration.Evaluate(obj.Object, lives(objects))
	for _, err := range evaluated.Errors {
		log.FromContext(ctx).Error(err, "status expression failed; its field is left out")
	}
	computed := Computed{Fields: evaluated.Fields,
		Conditions: append([]chartapi.ConditionValue{Ready(isDeployed, objects)}, evaluated.Conditions...)}
	if r.Held != nil {
		if why, held := r.Held(key); held {
			computed.Conditions = append(computed.Conditions, chartapi.ConditionValue{Type: names.ConditionRolloutHeld,
				Status: "True", Reason: names.ReasonRolloutHalted, Message: why})
		} else {
			computed.Absent = []string{names.ConditionRolloutHeld}
		}
	}
	if last, ok := r.Applied.last(key); ok && last.uid == obj.GetUID() {
		computed.ObservedGeneration = &last.generation
	}
	return current, Apply(current, r.Declaration.Kind.Status.Fields, computed, metav1.Now()), nil
}

// releaseObjects reads the objects of the deployed release, as the Helm reconciler's post hook
// learnt them from its manifest (false before the first one since the process started), from
// the cache (release objects are cached by their label), without copying them: they are only
// read. Objects the cache holds typed are converted to the maps that expressions and kstatus read.
func (r *Reconciler) releaseObjects(ctx context.Context, key types.NamespacedName) ([]ReleaseObject, bool, error) {
	return r.readObjects(key, func(ref Ref) (map[string]any, error) {
		if err := r.watch(ref.GVK); err != nil {
			return nil, err
		}
		live := caches.ReleaseObject(r.Scheme(), ref.GVK)
		if err := r.objects.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, live, client.UnsafeDisableDeepCopy); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return caches.Content(live, ref.GVK)
	})
}

// readObjects returns the objects of the release last applied to key (false when none is known
// yet), each read with get (nil, nil: not found) unless it is opaque or outside the namespaces
// the operator's caches hold.
func (r *Reconciler) readObjects(key types.NamespacedName, get func(Ref) (map[string]any, error)) ([]ReleaseObject, bool, error) {
	last, known := r.Applied.last(key)
	if !known {
		return nil, false, nil
	}
	out := make([]ReleaseObject, 0, len(last.refs))
	for _, ref := range last.refs {
		_, watched := r.Namespaces[ref.Namespace]
		o := ReleaseObject{Ref: ref, Unfollowed: r.Namespaces != nil && ref.Namespace != "" && !watched}
		if !ref.Opaque() && !o.Unfollowed {
			var err error
			if o.Live, err = get(ref); err != nil {
				return nil, true, err
			}
		}
		out = append(out, o)
	}
	return out, true, nil
}

// ReadyLive tells whether a release is Ready by the rules of the Ready condition, over its
// objects as reader (the apiserver) has them now: a cache may not have seen the release's last
// upgrade yet, and would call a Deployment that has not started rolling out ready. Every
// condition the chart declares to gate rollouts (gatesRollout in kind.yaml) must be True over
// those objects too. It returns why the release is not Ready, or "" when it is.
func (r *Reconciler) ReadyLive(ctx context.Context, reader client.Reader, key types.NamespacedName) (string, error) {
	objects, known, err := r.readObjects(key, func(ref Ref) (map[string]any, error) {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(ref.GVK)
		if err := reader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, live); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return live.Object, nil
	})
	switch {
	case err != nil:
		return "", err
	case !known:
		return "its objects are not known yet", nil
	}
	if c := Ready(true, objects); c.Status != "True" {
		return c.Message, nil // never empty: it names the objects not ready
	}
	declared := r.Declaration.Kind.Status.Conditions
	if !slices.ContainsFunc(declared, func(c chartapi.Condition) bool { return c.GatesRollout }) {
		return "", nil
	}
	self := &unstructured.Unstructured{}
	self.SetGroupVersionKind(r.GVK)
	if err := r.Get(ctx, key, self); err != nil {
		return "", err
	}
	// Evaluate returns the declared conditions in their order; the first failing gate is named.
	for i, c := range r.Declaration.Evaluate(self.Object, lives(objects)).Conditions {
		if declared[i].GatesRollout && c.Status != "True" {
			return fmt.Sprintf("condition %s is %s (%s): %s", c.Type, c.Status, c.Reason, c.Message), nil
		}
	}
	return "", nil
}

// Namespaced tells, from mapper, whether a kind is namespaced; a kind it does not know is
// taken as namespaced (in the release's namespace).
func Namespaced(mapper meta.RESTMapper) func(schema.GroupVersionKind) bool {
	return func(gvk schema.GroupVersionKind) bool {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		return err != nil || m.Scope.Name() == meta.RESTScopeNameNamespace
	}
}

// lives are the live objects of a release's objects, those the cache holds.
func lives(objects []ReleaseObject) []map[string]any {
	out := make([]map[string]any, 0, len(objects))
	for _, o := range objects {
		if o.Live != nil {
			out = append(out, o.Live)
		}
	}
	return out
}

// statusPatch returns the JSON merge patch (RFC 7386) that turns status current into desired,
// or nil when they are equal. current is a stored status, never nil: desired has none for a
// status the Helm reconciler has not written.
func statusPatch(current, desired map[string]any) ([]byte, error) {
	from, err := json.Marshal(current)
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(desired)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil || string(patch) == "{}" {
		return nil, err
	}
	return patch, nil
}

// The two writers of a status are ordered by these windows, not by locks: each write is
// guarded by the resourceVersion it read, and the later writer keeps the earlier one's fields.
const (
	// wakeDelay is how long after a successful Helm action (its post hook) the Reconciler runs.
	// The post hooks run just before helm-operator-plugins' updater writes status, and that write
	// carries the Reconciler's fields already (PluginWrites); a patch of the Reconciler's sent at
	// once would only make the updater's write conflict and retry after its backoff. Waking a
	// moment later lets the updater's write land first, and the Reconciler then writes only what
	// changed since (or what the updater's write could not carry).
	wakeDelay = time.Second
	// coalesceDelay is how long a request of the Reconciler waits in its queue, so that the
	// bursts of events a rollout brings (a Deployment's status changes several times in a
	// second) end in one status write.
	coalesceDelay = 500 * time.Millisecond
	// conflictRetry is how soon the Reconciler tries again after its patch met a newer
	// resourceVersion (the updater wrote in between).
	conflictRetry = coalesceDelay
)

// coalescing queues, coalesceDelay after each event, the requests of the event's objects; the
// queue holds one entry per resource, so the events of that window share one reconcile. It
// handles the events of informers (source.Kind), which send no generic ones.
func coalescing(requests func(client.Object) []reconcile.Request) handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	add := func(q queue, objs ...client.Object) {
		for _, o := range objs {
			for _, r := range requests(o) {
				q.AddAfter(r, coalesceDelay)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) { add(q, e.Object) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) { add(q, e.ObjectOld, e.ObjectNew) },
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) { add(q, e.Object) },
	}
}
