package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	release "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/status"
)

// dependentWatches wakes the Helm reconciler when an object of one of its releases changes or
// goes. It stands in for helm-operator-plugins' own dependent watches (turned off with
// reconciler.SkipDependentWatches) and keeps their rules: a kind is watched from the first
// release that renders it, and an object wakes the custom resource it points at through its
// owner reference, where the release object can carry one (same namespace, no keep policy),
// or through the owner annotations otherwise; creates and generic events wake nothing. Unlike
// the upstream hook, which watches a kind one way only (the way of the first object of the kind
// it meets), one watch of a kind follows both ways: objects of a kind that point at their owner
// both ways (an owned ConfigMap beside a kept one, or one in another namespace) all wake the
// reconciler. What differs too is the informer: the object caches.ReleaseObject chooses, typed
// for the kinds the scheme knows, shared with the status controller, where the upstream hook
// always asks for an unstructured one.
//
// Update events reach it already thinned by the cache (package caches: updates of status only
// are dropped there, for every controller of the Helm reconciler's).
type dependentWatches struct {
	mapper   meta.RESTMapper
	followed *followed // its cache and scheme are those of the watches too
	waiters  *actionclient.Waiters
	// ownDelete tells this process's own deletions of release objects (helmconfig.Records).
	ownDelete func(types.UID) bool

	mu      sync.Mutex
	ctrl    reconciler.ControllerSetup
	watched map[schema.GroupVersionKind]bool
}

// followed is what the manager's cache holds of release objects: the kinds it follows, from the
// first ownership check of an object of the kind, or from the first release that renders it
// (its dependent watch); false for a kind whose informer did not list in time.
type followed struct {
	scheme *runtime.Scheme
	cache  cache.Cache

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]bool
}

// followWait bounds the wait for a kind's informer to list at the first read of the kind: one
// that cannot list (the operator may not list the kind) is read live until a dependent watch
// follows it.
const followWait = 30 * time.Second

// read is the release object key of kind gvk as the cache holds it: nil when it holds no such
// object (of this shard), and followed false when it does not follow the kind. The first read
// of a kind starts its informer (the one its dependent watch shares) and waits for it to list,
// so that the first releases of a process are checked as every later one is, not read live.
func (f *followed) read(gvk schema.GroupVersionKind, key types.NamespacedName) (obj client.Object, followed bool) {
	f.mu.Lock()
	followed, tried := f.kinds[gvk]
	f.mu.Unlock()
	if tried && !followed {
		return nil, false
	}
	obj = caches.ReleaseObject(f.scheme, gvk)
	ctx, cancel := context.WithTimeout(context.Background(), followWait)
	defer cancel()
	err := f.cache.Get(ctx, key, obj) // waits for the kind's informer to list, starting it if need be
	if !tried {
		f.mu.Lock()
		f.kinds[gvk] = f.kinds[gvk] || !apierrors.IsTimeout(err)
		followed = f.kinds[gvk]
		f.mu.Unlock()
	}
	if !followed || err != nil {
		return nil, followed
	}
	return obj, true
}

// stillTaken reads live whether the object t names is still t's release's: true when it is, or
// when its kind is none the cache follows (its group is then unknown), so that only an object
// known gone or changed hands wakes its waiters at once.
func (f *followed) stillTaken(live client.Reader) func(helmconfig.TakenError) bool {
	return func(t helmconfig.TakenError) bool {
		f.mu.Lock()
		var gvk schema.GroupVersionKind
		for k, on := range f.kinds {
			if on && k.Kind == t.Kind {
				gvk = k
			}
		}
		f.mu.Unlock()
		if gvk.Empty() {
			return true
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		err := live.Get(context.Background(), types.NamespacedName{Namespace: t.Namespace, Name: t.Name}, obj)
		if apierrors.IsNotFound(err) {
			return false
		}
		return err != nil || obj.GetAnnotations()[names.HelmReleaseNameAnnotation] == t.Release
	}
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
		refs, err := status.ParseManifest(rel.Manifest, owner.GetNamespace(), func(schema.GroupVersionKind) bool { return true })
		if err != nil {
			return err
		}
		for _, ref := range refs { // a List stands for its items
			if err := d.watch(owner, ref.GVK, log); err != nil {
				return err
			}
		}
		return nil
	}
}

// watch adds the watch of a release object kind, unless there is one. Called with d.mu held.
func (d *dependentWatches) watch(owner *unstructured.Unstructured, gvk schema.GroupVersionKind, log logr.Logger) error {
	if gvk.Empty() || d.watched[gvk] {
		return nil
	}
	namespaced, err := apiutil.IsGVKNamespaced(owner.GroupVersionKind(), d.mapper)
	if err != nil {
		return err
	}
	owners := caches.OwnerRequests(owner.GroupVersionKind().GroupKind(), namespaced, true)
	if err := d.ctrl.Watch(source.Kind(d.followed.cache, caches.ReleaseObject(d.followed.scheme, gvk), d.wakeOwners(gvk.Kind, owners))); err != nil {
		return err
	}
	d.watched[gvk] = true
	d.followed.mu.Lock()
	d.followed.kinds[gvk] = true
	d.followed.mu.Unlock()
	log.V(1).Info("Watching dependent resource", "dependentAPIVersion", gvk.GroupVersion(), "dependentKind", gvk.Kind)
	return nil
}

// wakeOwners wakes, for an update or deletion of a release object of kind, the custom resources
// owners maps it to. Release objects are only created by the reconcile that then reads them: a
// create event would only cost a second reconcile. A deleted one wakes its resource at once,
// unless the resource's last reconcile failed: then its retry, at the queue's backoff, is due. A
// failing install's rollback deletes the objects it created, and waking at once would start the
// next attempt at once, so that the retries of a failing release never backed off. Anyone else's
// deletion of it (not this process's) is still not left to that retry, which may be running and
// have read the object before it went: it wakes the resource at the queue's next backoff. A
// deleted one also wakes the resources of other releases that wait for it (Waiters).
func (d *dependentWatches) wakeOwners(kind string, owners func(client.Object) []reconcile.Request) handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			for _, r := range slices.Concat(owners(e.ObjectOld), owners(e.ObjectNew)) {
				q.Add(r)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			own := d.ownDelete != nil && d.ownDelete(e.Object.GetUID())
			for _, r := range owners(e.Object) {
				switch {
				case q.NumRequeues(r) == 0:
					q.Add(r)
				case !own:
					q.AddRateLimited(r)
				}
			}
			d.waiters.ObjectGone(kind, e.Object.GetNamespace(), e.Object.GetName())
		},
	}
}
