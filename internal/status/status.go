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
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ConditionAvailable mirrors the Available condition of the release's Deployments.
const ConditionAvailable = "Available"

// Reconciler writes the status fields of one custom resource kind.
type Reconciler struct {
	client.Client
	GVK      schema.GroupVersionKind
	Observed *Observed
}

// SetupWithManager registers the controller: it runs when the custom resource, a Deployment or
// Service it controls, or the Helm reconciler's progress (Observed) changes. selector limits it
// to the resources the Helm reconciler takes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, selector metav1.LabelSelector) error {
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(r.GVK)
	var forPredicates []predicate.Predicate
	if len(selector.MatchLabels)+len(selector.MatchExpressions) > 0 {
		p, err := predicate.LabelSelectorPredicate(selector)
		if err != nil {
			return err
		}
		forPredicates = append(forPredicates, p)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(fmt.Sprintf("%s-status", r.GVK.Kind)).
		For(owner, builder.WithPredicates(forPredicates...)).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		WatchesRawSource(source.Channel(r.Observed.events, &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{})).
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
	var deployments appsv1.DeploymentList
	if err := r.List(ctx, &deployments, client.InNamespace(obj.GetNamespace())); err != nil {
		return ctrl.Result{}, err
	}
	var services corev1.ServiceList
	if err := r.List(ctx, &services, client.InNamespace(obj.GetNamespace())); err != nil {
		return ctrl.Result{}, err
	}
	generation, observed := r.Observed.Generation(obj.GetUID())
	current, _, _ := unstructured.NestedMap(obj.Object, "status")
	desired := Compute(current, Owned{
		Deployments: controlledBy(obj, deployments.Items),
		Services:    controlledBy(obj, services.Items),
	}, generation, observed, metav1.Now())
	if reflect.DeepEqual(current, desired) {
		return ctrl.Result{}, nil
	}
	patched := obj.DeepCopy()
	patched.Object["status"] = desired
	// The optimistic lock keeps a concurrent write of the Helm reconciler's conditions from
	// being overwritten; on conflict the next event brings us back.
	err := r.Status().Patch(ctx, patched, client.MergeFromWithOptions(obj, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// controlledBy keeps the objects whose controller is owner (the release's objects carry it).
func controlledBy[T any, PT interface {
	*T
	metav1.Object
}](owner metav1.Object, items []T) []T {
	var out []T
	for i := range items {
		if metav1.IsControlledBy(PT(&items[i]), owner) {
			out = append(out, items[i])
		}
	}
	return out
}
