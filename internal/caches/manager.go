package caches

import (
	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/eventfilter"
	"github.com/example/myproxy-operator/internal/managedlabel"
	"github.com/example/myproxy-operator/internal/ownwrites"
	"github.com/example/myproxy-operator/internal/shard"
)

// managerEntries are the rows of Table for the manager's cache: each kind it caches is in one
// of these classes.
var managerEntries = []Entry{
	{
		Cache: "manager", Holds: "the custom resources of every watched kind",
		Selected: "the watch's selector and this shard's (package shard)", Keeps: "all but managed fields",
		Events: "fast path: updates that change only status or add a finalizer are dropped (the status " +
			"controller watches the same informers unfiltered); always: additions and updates of resources " +
			"another shard claims are held back",
		ReadBy: "the Helm reconciler, the status controller, the client's reads of custom resources",
	},
	{
		Cache: "manager", Holds: "release objects: every other kind a release renders, Secrets included, as each " +
			"is first watched (typed where the scheme knows the kind, ReleaseObject)",
		Selected: "the managed label with this shard's value (package managedlabel)", Keeps: "all but managed fields",
		Events: "fast path: updates of bookkeeping only (status, resourceVersion, the Deployment revision) " +
			"and deletes the operator's own Helm actions made (package ownwrites) are dropped; stock path: " +
			"updates of status and resourceVersion only are dropped",
		ReadBy: "the dependent watches (drift), the status controller (Ready, declared fields)",
	},
}

// Manager returns the manager's cache options and the constructor of its cache, for the
// watches ws (their custom resources), this process's shard, and own, the operator's writes.
// Of the kinds releases render, it holds only release objects: without that, watching all
// namespaces would cache every ConfigMap of the cluster.
//
// Without fastPaths (--fast-paths=false) the events are helm-operator-plugins' own: every
// update of a custom resource reaches the Helm reconciler (status writes included), and release
// objects follow the plugins' dependent predicate (an update of status and resourceVersion only
// is ignored; the operator's own deletes pass). Holding back what another shard claims is not a
// fast path: it stays.
func Manager(ws []watches.Watch, namespaces map[string]cache.Config, s shard.Shard, own *ownwrites.Registry, fastPaths bool) (cache.Options, cache.NewCacheFunc) {
	// Secrets are release objects like any other kind: a chart's Secret carries the managed
	// label, and hand edits of it are set back. Release records and every other Secret carry
	// none; records are watched through a cache of their metadata (ReleaseRecords), as are the
	// Secrets that values name (SecretMetadata).
	byObject := map[client.Object]cache.ByObject{}
	filters := map[schema.GroupVersionKind]eventfilter.Filter{}
	kinds := map[schema.GroupVersionKind]bool{}
	for _, w := range ws {
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(w.GroupVersionKind)
		byObject[cr] = cache.ByObject{Label: customResourceSelector(w, s)}
		filters[w.GroupVersionKind] = eventfilter.IgnoreClaimedElsewhere(s.ClaimedByOther)
		if fastPaths {
			filters[w.GroupVersionKind] = eventfilter.Both(eventfilter.IgnoreStatusOnlyChanges(), filters[w.GroupVersionKind])
		}
		kinds[w.GroupVersionKind] = true
	}
	opts := cache.Options{
		DefaultNamespaces:    namespaces,
		DefaultLabelSelector: managedlabel.Selector(s.ManagedValue()),
		DefaultTransform:     StripManagedFields,
		ByObject:             byObject,
	}
	releaseObjects := func(reader client.Reader, scheme *runtime.Scheme) eventfilter.Filter {
		if !fastPaths {
			return eventfilter.Filter{Update: eventfilter.IgnoreStatusUpdates}
		}
		return eventfilter.Filter{
			Update: eventfilter.IgnoreBookkeepingUpdates,
			Delete: eventfilter.ReleaseObjectDeletes(reader, scheme, kinds, own),
		}
	}
	return opts, eventfilter.NewCache(filters, releaseObjects)
}

// customResourceSelector picks the custom resources of w that this shard acts on and w's
// selector takes (an invalid selector is reported when its reconciler is set up).
func customResourceSelector(w watches.Watch, s shard.Shard) labels.Selector {
	sel := s.Selector()
	if w.Selector != nil {
		if ws, err := metav1.LabelSelectorAsSelector(w.Selector); err == nil {
			if reqs, _ := ws.Requirements(); len(reqs) > 0 {
				sel = sel.Add(reqs...)
			}
		}
	}
	return sel
}
