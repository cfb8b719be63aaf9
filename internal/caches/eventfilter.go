// Event filters drop informer events of chosen kinds before any controller sees them. They wrap
// the manager's cache (a manager option), the one place where events of the Helm reconciler's
// own watches can be filtered: helm-operator-plugins takes no predicates for its primary watch
// or its watch on release Secrets.

package caches

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Filter decides which events of a kind reach the handlers; a nil func lets every event of
// that type through. Deletes always pass.
type Filter struct {
	Add    func(obj any) bool
	Update func(oldObj, newObj any) bool
}

// ReleaseObjectUpdates drops updates of release objects that change only status and
// resourceVersion (the plugins' own rule) and, with ignoreBookkeeping (the fast path
// "bookkeeping"), only bookkeeping.
func ReleaseObjectUpdates(ignoreBookkeeping bool) func(oldObj, newObj any) bool {
	// What helm-operator-plugins' dependent predicate ignores in an update of a release object:
	// status and resourceVersion (and the managed fields; the caches keep none).
	metadata := Ignore{"resourceVersion": nil, "managedFields": nil}
	if ignoreBookkeeping {
		// Bookkeeping is what the cluster's controllers keep for themselves on objects a chart
		// rendered: the Deployment controller's revision annotation, written once on every new
		// Deployment. Changing it is not drift (a reconcile would find nothing to correct).
		metadata["annotations"] = Ignore{"deployment.kubernetes.io/revision": nil}
	}
	ignore := Ignore{"status": nil, "metadata": metadata}
	return func(oldObj, newObj any) bool {
		// The content of an unstructured object is its own (read only here), not a copy.
		o, err1 := runtime.DefaultUnstructuredConverter.ToUnstructured(oldObj)
		n, err2 := runtime.DefaultUnstructuredConverter.ToUnstructured(newObj)
		return err1 != nil || err2 != nil || !Equal(o, n, ignore)
	}
}

// Unfiltered returns the cache that c filters (c itself when it filters nothing), for
// controllers that must see every event of a kind the filters thin out.
func Unfiltered(c cache.Cache) cache.Cache {
	if fc, ok := c.(*filteringCache); ok {
		return fc.Cache
	}
	return c
}

// NewCache returns a cache constructor whose informers of the kinds in filters deliver only the
// events their kind's Filter accepts, and informers of every other kind those that
// releaseObjects accepts. The other kinds are those the
// cache selects with its default selector (the managed label: release objects); a kind the
// cache options select otherwise (ByObject) must be in filters, so that no kind falls under
// the release objects' filter without having been declared one: the constructor fails if one
// is not.
func NewCache(filters map[schema.GroupVersionKind]Filter, releaseObjects Filter) cache.NewCacheFunc {
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		for obj := range opts.ByObject {
			gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
			if err != nil {
				return nil, err
			}
			if _, ok := filters[gvk]; !ok {
				return nil, fmt.Errorf("the cache selects %s by an option of its own, but no event filter is declared for it", gvk)
			}
		}
		c, err := cache.New(cfg, opts)
		if err != nil {
			return nil, err
		}
		return &filteringCache{Cache: c, scheme: opts.Scheme, filters: filters, releaseObjects: releaseObjects}, nil
	}
}

type filteringCache struct {
	cache.Cache
	scheme         *runtime.Scheme
	filters        map[schema.GroupVersionKind]Filter
	releaseObjects Filter
}

func (c *filteringCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return nil, err
	}
	return c.wrap(gvk, i), nil
}

func (c *filteringCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformerForKind(ctx, gvk, opts...)
	if err != nil {
		return nil, err
	}
	return c.wrap(gvk, i), nil
}

func (c *filteringCache) wrap(gvk schema.GroupVersionKind, i cache.Informer) cache.Informer {
	f, ok := c.filters[gvk]
	if !ok {
		f = c.releaseObjects
	}
	return &filteringInformer{Informer: i, filter: f}
}

type filteringInformer struct {
	cache.Informer
	filter Filter
}

func (i *filteringInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandler(i.filter.around(h))
}

func (i *filteringInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithResyncPeriod(i.filter.around(h), resync)
}

func (i *filteringInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithOptions(i.filter.around(h), opts)
}

// around returns h, called only for the events f lets through.
func (f Filter) around(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if f.Add == nil || f.Add(obj) {
				h.OnAdd(obj, isInInitialList)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if f.Update == nil || f.Update(oldObj, newObj) {
				h.OnUpdate(oldObj, newObj)
			}
		},
		DeleteFunc: h.OnDelete,
	}
}

// CustomResources is the Filter of a watched kind's custom resources. It drops the events that
// must not wake the Helm reconciler:
//   - additions and updates of a resource another shard acts on (claimedByOther), but the update
//     that hands one over; deletes pass, as the resource may have left this shard's cache;
//   - updates that change nothing a reconcile acts on: status writes and the uninstall finalizer
//     being added. Each reconcile writes status, the status controller too; without this, a
//     release that fails would be retried at once by its own status write, never backing off,
//     and drift that watchDependentResources=false leaves alone would be set back by the status
//     write that reports it. Spec, labels, annotations, deletion and removed finalizers pass.
func CustomResources(claimedByOther func(client.Object) bool) Filter {
	mine := func(obj any) bool {
		o, ok := obj.(client.Object)
		return !ok || !claimedByOther(o)
	}
	return Filter{Add: mine, Update: func(oldObj, newObj any) bool {
		o, ok1 := oldObj.(*unstructured.Unstructured)
		n, ok2 := newObj.(*unstructured.Unstructured)
		return mine(newObj) && (!ok1 || !ok2 || !Equal(o.Object, n.Object, notReconciled) || finalizersRemoved(o, n))
	}}
}

// notReconciled is what a reconcile of a custom resource does not act on: its status and
// what every write changes. Finalizers are compared apart (finalizersRemoved).
var notReconciled = Ignore{
	"status":   nil,
	"metadata": Ignore{"resourceVersion": nil, "managedFields": nil, "finalizers": nil},
}

func finalizersRemoved(o, n *unstructured.Unstructured) bool {
	kept := n.GetFinalizers()
	return slices.ContainsFunc(o.GetFinalizers(), func(f string) bool { return !slices.Contains(kept, f) })
}
