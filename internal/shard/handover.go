package shard

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/example/myproxy-operator/internal/names"
)

// handoverRetry is how soon a handover is tried again while this shard still acts on the
// resource (a reconcile's Helm call in flight) or the resource changed under the write.
const handoverRetry = 200 * time.Millisecond

// Handover hands the custom resources that name this shard in their claim (OwnerLabel)
// but are no longer this shard's (relabelled for another, also while this shard was down) over
// to their shard: once no Helm call of this shard is in flight on one, and none may start
// (Claims), it clears the claim; the new shard, whose cache filter held the resource back
// until then, claims it. It follows the claims through a metadata-only cache of the resources
// that name this shard (caches.Claims), and reads each resource from the apiserver before it
// writes.
type Handover struct {
	ClaimCache cache.Cache   // caches.Claims
	Live       client.Reader // the apiserver
	Writer     client.Writer
	GVK        schema.GroupVersionKind
	Shard      Shard
	Claims     *Claims
	Recorder   record.EventRecorder
}

// SetupWithManager registers the controller: it runs for each claimed resource that this
// shard's selector does not pick.
func (h *Handover) SetupWithManager(mgr ctrl.Manager) error {
	obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: h.GVK.GroupVersion().String(), Kind: h.GVK.Kind}}
	notMine := func(o client.Object) bool { return !h.Shard.Selector().Matches(labels.Set(o.GetLabels())) }
	moved := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return notMine(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return notMine(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(h.GVK.Kind + "-handover").
		WatchesRawSource(source.Kind[client.Object](h.ClaimCache, obj, &handler.EnqueueRequestForObject{}, moved)).
		Complete(h)
}

// Reconcile hands the resource over if it names this shard but is another's.
func (h *Handover) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(h.GVK)
	if err := h.Live.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if Owner(obj) != h.Shard.ID() || h.Shard.Selector().Matches(labels.Set(obj.GetLabels())) {
		return ctrl.Result{}, nil // not this shard's to give, or its own again
	}
	key := Key{GVK: h.GVK, NamespacedName: req.NamespacedName}
	if !h.Claims.Release(key) {
		return ctrl.Result{RequeueAfter: handoverRetry}, nil
	}
	unstructured.RemoveNestedField(obj.Object, "metadata", "labels", OwnerLabel)
	// The resource version read is the precondition: a concurrent change makes this retry.
	if err := h.Writer.Update(ctx, obj); err != nil {
		h.Claims.Reclaim(key)
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: handoverRetry}, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	h.Recorder.Eventf(obj, corev1.EventTypeNormal, names.ReasonShardHandedOver,
		"shard %s handed it over (labelled %s=%q)", h.Shard.ID(), Label, obj.GetLabels()[Label])
	return ctrl.Result{}, nil
}

// ErrHandedOver is returned for an action on a custom resource this shard handed over.
var ErrHandedOver = errors.New("handed over to another shard")

// Key names a custom resource of one kind.
type Key struct {
	GVK schema.GroupVersionKind
	types.NamespacedName
}

// Claims tracks this shard's actions in flight per custom resource, so that it hands a
// resource over only when none is, and starts none after. A handed-over resource is remembered
// until it comes back (Reclaim): a reconcile that began before the handover may still try an
// action on it, however late.
type Claims struct {
	mu       sync.Mutex
	inflight map[Key]int
	released map[Key]bool
}

// NewClaims returns an empty registry.
func NewClaims() *Claims {
	return &Claims{inflight: map[Key]int{}, released: map[Key]bool{}}
}

// Begin starts an action on k, unless k was handed over and this shard is not about to claim
// it again (claiming); End must follow.
func (c *Claims) Begin(k Key, claiming bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released[k] && !claiming {
		return ErrHandedOver
	}
	c.inflight[k]++
	return nil
}

// End ends an action Begin started.
func (c *Claims) End(k Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight[k]--; c.inflight[k] <= 0 {
		delete(c.inflight, k)
	}
}

// Release marks k handed over if no action is in flight on it, and reports whether it did.
func (c *Claims) Release(k Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight[k] > 0 {
		return false
	}
	c.released[k] = true
	return true
}

// Reclaim lets actions on k begin again: this shard owns it (again).
func (c *Claims) Reclaim(k Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.released, k)
}

// Len is how many resources are handed over or have actions in flight.
func (c *Claims) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight) + len(c.released)
}
