// Package status keeps the MyProxy status fields that the Helm reconciler does not own:
// replicas, readyReplicas and selector (read by the scale subresource), image, url,
// observedGeneration and the Available condition, all taken from the objects the release owns.
//
// It is a controller of its own because helm-operator-plugins' status updater rewrites status
// as {conditions, deployedRelease} whenever it writes, dropping any other field. This controller
// puts them back on the next event and never changes the reconciler's own conditions.
package status

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/example/myproxy-operator/internal/eventfilter"
)

// ConditionAvailable mirrors the Available condition of the release's Deployments.
const ConditionAvailable = "Available"

// Reconciler writes the status fields of one custom resource kind.
type Reconciler struct {
	client.Client
	GVK      schema.GroupVersionKind
	Observed *Observed
	// MaxConcurrentReconciles is the number of workers (at least 1). With one, the status of
	// a converging fleet of a thousand lagged a minute behind its Deployments.
	MaxConcurrentReconciles int
}

// controllerIndex indexes cached objects by the UID of their controller, so that finding a
// release's Deployments and Services does not copy every one in the namespace.
const controllerIndex = ".metadata.controllerUID"

func indexByController(obj client.Object) []string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// SetupWithManager registers the controller: it runs when the custom resource, a Deployment or
// Service it controls, or the Helm reconciler's progress (Observed) changes. selector limits it
// to the resources the Helm reconciler takes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, selector metav1.LabelSelector) error {
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(r.GVK)
	// The manager's cache hides status-only changes of the custom resources and of the objects
	// of their releases (they must not wake the Helm reconciler), and this controller follows
	// exactly those. So it watches the same informers unfiltered, ignoring only its own writes.
	forPredicates := []predicate.Predicate{predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return ChangedBeyondOwnFields(e.ObjectOld, e.ObjectNew)
	}}}
	if len(selector.MatchLabels)+len(selector.MatchExpressions) > 0 {
		p, err := predicate.LabelSelectorPredicate(selector)
		if err != nil {
			return err
		}
		forPredicates = append(forPredicates, p)
	}
	for _, obj := range []client.Object{ownedKind(deploymentGVK), ownedKind(serviceGVK)} {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), obj, controllerIndex, indexByController); err != nil {
			return err
		}
	}
	unfiltered := eventfilter.Unfiltered(mgr.GetCache())
	owned := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), owner, handler.OnlyControllerOwner())
	return ctrl.NewControllerManagedBy(mgr).
		Named(fmt.Sprintf("%s-status", r.GVK.Kind)).
		WatchesRawSource(source.Kind[client.Object](unfiltered, owner, coalesced(&handler.EnqueueRequestForObject{}), forPredicates...)).
		WatchesRawSource(source.Kind[client.Object](unfiltered, ownedKind(deploymentGVK), coalesced(owned))).
		WatchesRawSource(source.Kind[client.Object](unfiltered, ownedKind(serviceGVK), coalesced(owned))).
		WatchesRawSource(source.Channel(r.Observed.events, &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.MaxConcurrentReconciles)}).
		Complete(r)
}

// Reconcile recomputes the status fields and patches them when they changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.GVK)
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if obj.GetDeletionTimestamp() != nil {
		r.Observed.Forget(obj.GetUID())
		return ctrl.Result{}, nil
	}
	current, _, _ := unstructured.NestedMap(obj.Object, "status")
	if _, ok := current["conditions"]; !ok {
		// The Helm reconciler has not reached it yet. Writing now would only make its first
		// update (the finalizer) conflict; its first status write brings us back.
		return ctrl.Result{}, nil
	}
	// Read-only lists: the cache's objects are not copied.
	owned := []client.ListOption{client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{controllerIndex: string(obj.GetUID())}, client.UnsafeDisableDeepCopy}
	deployments, err := listOwned[appsv1.Deployment](ctx, r, deploymentGVK, owned, deploymentView)
	if err != nil {
		return ctrl.Result{}, err
	}
	services, err := listOwned[corev1.Service](ctx, r, serviceGVK, owned, nil)
	if err != nil {
		return ctrl.Result{}, err
	}
	generation, observed := r.Observed.Generation(obj.GetUID())
	desired := Compute(current, Owned{Deployments: deployments, Services: services}, generation, observed, metav1.Now())
	changed := MergePatch(current, desired)
	if len(changed) == 0 {
		return ctrl.Result{}, nil
	}
	// Only the fields that changed are sent: client.MergeFrom would serialise and diff the whole
	// object twice, deployedRelease's manifest included, for a patch of two fields. The
	// resourceVersion is an optimistic lock: it keeps a concurrent write of the Helm reconciler's
	// conditions from being overwritten; on conflict the next event brings us back.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": obj.GetResourceVersion()},
		"status":   changed,
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	err = r.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsConflict(err) {
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// The release's objects are read as unstructured: the Helm reconciler's watches of its
// release's kinds are unstructured, and a typed watch of the same kind would be a second
// informer caching every object twice.
var (
	deploymentGVK = appsv1.SchemeGroupVersion.WithKind("Deployment")
	serviceGVK    = corev1.SchemeGroupVersion.WithKind("Service")
)

func ownedKind(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// listOwned lists the cached objects of a kind that opts select, converted to T; view, when
// set, picks the part of each object to convert.
func listOwned[T any](ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, opts []client.ListOption,
	view func(map[string]any) map[string]any) ([]T, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	out := make([]T, len(list.Items))
	for i := range list.Items {
		obj := list.Items[i].Object
		if view != nil {
			obj = view(obj)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// deploymentView is the part of a Deployment that Compute reads: metadata, status, replicas,
// selector and the containers' images. Converting the whole object, pod template and all, was a
// fifth of this controller's CPU.
func deploymentView(d map[string]any) map[string]any {
	spec, _ := d["spec"].(map[string]any)
	containers, _, _ := unstructured.NestedFieldNoCopy(spec, "template", "spec", "containers")
	list, _ := containers.([]any)
	images := make([]any, 0, len(list))
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			images = append(images, map[string]any{"name": m["name"], "image": m["image"]})
		}
	}
	return map[string]any{
		"metadata": d["metadata"],
		"status":   d["status"],
		"spec": map[string]any{"replicas": spec["replicas"], "selector": spec["selector"],
			"template": map[string]any{"spec": map[string]any{"containers": images}}},
	}
}
