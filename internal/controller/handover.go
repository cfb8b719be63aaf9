package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
)

// handoverRetry is how soon a handover is tried again while this shard still acts on the
// resource (a reconcile's Helm call in flight) or the resource changed under the write.
const handoverRetry = 200 * time.Millisecond

// Handover hands a custom resource that left this shard (relabelled for another) over to its
// new shard: once no Helm call of this shard is in flight on it, and none may start
// (shard.Claims), it clears the owner annotation that names this shard; the new shard, whose
// cache filter held the resource back until then, claims it. It runs on the resource's
// disappearance from this shard's cache, and reads the resource from the apiserver: a resource
// deleted for good is forgotten.
type Handover struct {
	Cache    client.Reader // this shard's cache
	Live     client.Reader // the apiserver
	Writer   client.Writer
	GVK      schema.GroupVersionKind
	Shard    shard.Shard
	Claims   *shard.Claims
	Recorder record.EventRecorder
}

// SetupWithManager registers the controller; it sees only deletes from the cache.
func (h *Handover) SetupWithManager(mgr ctrl.Manager) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(h.GVK)
	onlyDeletes := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(fmt.Sprintf("%s-handover", h.GVK.Kind)).
		WatchesRawSource(source.Kind[client.Object](mgr.GetCache(), obj, &handler.EnqueueRequestForObject{}, onlyDeletes)).
		Complete(h)
}

// Reconcile hands the resource over if it is this shard's and now another's.
func (h *Handover) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(h.GVK)
	if err := h.Cache.Get(ctx, req.NamespacedName, obj); err == nil || !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err // back in this shard's cache: still its own
	}
	err := h.Live.Get(ctx, req.NamespacedName, obj)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if shard.Owner(obj) != h.Shard.ID() || h.Shard.Selector().Matches(labels.Set(obj.GetLabels())) {
		return ctrl.Result{}, nil // not this shard's to give, or its own again (the cache lags)
	}
	key := shard.Key{GVK: h.GVK, NamespacedName: req.NamespacedName}
	if !h.Claims.Release(key) {
		return ctrl.Result{RequeueAfter: handoverRetry}, nil
	}
	a := obj.GetAnnotations()
	delete(a, shard.OwnerAnnotation)
	obj.SetAnnotations(a)
	// The resource version read is the precondition: a concurrent change makes this retry.
	if err := h.Writer.Update(ctx, obj); err != nil {
		h.Claims.Reclaim(key)
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: handoverRetry}, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	h.Recorder.Eventf(obj, corev1.EventTypeNormal, names.ReasonShardHandedOver,
		"shard %s handed it over (labelled %s=%q)", h.Shard.ID(), shard.Label, obj.GetLabels()[shard.Label])
	return ctrl.Result{}, nil
}
