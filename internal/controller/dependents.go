package controller

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	"github.com/operator-framework/helm-operator-plugins/pkg/manifestutil"
	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	sdkhandler "github.com/operator-framework/operator-lib/handler"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/helmconfig"
)

// dependentWatches wakes the Helm reconciler when an object of one of its releases changes or
// goes. It stands in for helm-operator-plugins' own dependent watches (turned off with
// reconciler.SkipDependentWatches) and keeps their rules: a kind is watched from the first
// release that renders it, through owner references where the release object can carry one
// (same namespace, no keep policy) and through the owner annotations otherwise; creates and
// generic events wake nothing. Unlike the upstream hook, which watches a kind one way only (the
// way of the first object of the kind it meets), a kind whose release objects point at their
// owner both ways (an owned ConfigMap beside a kept one, or one in another namespace) is
// watched both ways: otherwise the objects of the other way would never wake the reconciler. What differs is the informer: the object caches.ReleaseObject chooses,
// typed for the kinds the scheme knows, shared with the status controller, where the upstream
// hook always asks for an unstructured one.
//
// Update events reach it already thinned by the cache (package caches: updates of status only
// are dropped there, for every controller of the Helm reconciler's).
type dependentWatches struct {
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	cache  cache.Cache

	mu      sync.Mutex
	ctrl    reconciler.ControllerSetup
	watched map[dependentWatch]bool
}

// dependentWatch is one watch of a kind: through owner references, or through the owner
// annotations.
type dependentWatch struct {
	gvk        schema.GroupVersionKind
	byOwnerRef bool
}

// setup keeps the controller the watches are added to (a reconciler.ControllerSetupFunc).
func (d *dependentWatches) setup(c reconciler.ControllerSetup) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ctrl = c
	return nil
}

// postHook adds the watches a release needs after each install, upgrade and reconcile.
func (d *dependentWatches) postHook(log logr.Logger) func(*unstructured.Unstructured, *release.Release) error {
	return func(owner *unstructured.Unstructured, rel *release.Release) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, manifest := range releaseutil.SplitManifests(rel.Manifest) {
			var obj unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
				return err
			}
			if obj.IsList() { // a List is no resource: its items are
				if err := obj.EachListItem(func(item runtime.Object) error {
					return d.watch(owner, item.(*unstructured.Unstructured), log)
				}); err != nil {
					return err
				}
				continue
			}
			if err := d.watch(owner, &obj, log); err != nil {
				return err
			}
		}
		return nil
	}
}

// watch adds the watch of dependent's kind, the way dependent points at its owner, unless
// there is one. Called with d.mu held.
func (d *dependentWatches) watch(owner, dependent *unstructured.Unstructured, log logr.Logger) error {
	gvk := dependent.GroupVersionKind()
	if gvk.Empty() {
		return nil
	}
	byOwnerRef, err := helmconfig.CanOwn(d.mapper, owner, dependent)
	if err != nil {
		return err
	}
	key := dependentWatch{gvk: gvk, byOwnerRef: byOwnerRef && !manifestutil.HasResourcePolicyKeep(dependent.GetAnnotations())}
	if d.watched[key] {
		return nil
	}
	var h handler.EventHandler
	if key.byOwnerRef {
		h = handler.EnqueueRequestForOwner(d.scheme, d.mapper, owner, handler.OnlyControllerOwner())
	} else {
		h = &sdkhandler.EnqueueRequestForAnnotation[client.Object]{Type: owner.GroupVersionKind().GroupKind()}
	}
	// Release objects are only created by the reconcile that then reads them: a create event
	// would only cost a second reconcile.
	wake := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	if err := d.ctrl.Watch(source.Kind(d.cache, caches.ReleaseObject(d.scheme, gvk), deletesBackOff{h}, wake)); err != nil {
		return err
	}
	d.watched[key] = true
	log.V(1).Info("Watching dependent resource", "dependentAPIVersion", gvk.GroupVersion(), "dependentKind", gvk.Kind,
		"byOwnerReference", key.byOwnerRef)
	return nil
}

// deletesBackOff wakes the reconciler for a deleted release object at once, unless the
// resource's last reconcile failed: its retry, at the queue's backoff, is already due. A failing
// install's rollback deletes the objects it created, and waking at once would start the next
// attempt at once, so that the retries of a failing release never backed off.
type deletesBackOff struct{ handler.EventHandler }

// Delete implements handler.EventHandler.
func (h deletesBackOff) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Delete(ctx, e, unlessRetrying{q})
}

// unlessRetrying adds a request unless a failure of it was requeued and not yet forgotten.
type unlessRetrying struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
}

func (q unlessRetrying) Add(r reconcile.Request) {
	if q.NumRequeues(r) == 0 {
		q.TypedRateLimitingInterface.Add(r)
	}
}
