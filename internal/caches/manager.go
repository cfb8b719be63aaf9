package caches

import (
	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
)

// Manager returns the manager's cache options and the constructor of its cache, for the
// watches ws (their custom resources), this process's shard, and own, the operator's writes.
// Of the kinds releases render, it holds only release objects: without that, watching all
// namespaces would cache every ConfigMap of the cluster.
//
// Custom resources are filtered by CustomResources (another shard's, and updates of
// status only); release objects follow the plugins' dependent predicate (an update of status
// and resourceVersion only is ignored), and with ignoreBookkeeping updates of bookkeeping only
// too (ReleaseObjectUpdates).
func Manager(ws []watches.Watch, namespaces map[string]cache.Config, s shard.Shard, ignoreBookkeeping bool) (cache.Options, cache.NewCacheFunc) {
	// Secrets are release objects like any other kind: a chart's Secret carries the managed
	// label, and hand edits of it are set back. Release records and every other Secret carry
	// none; records are watched through a cache of their metadata (ReleaseRecords), as are the
	// Secrets that values name (SecretMetadata).
	byObject := map[client.Object]cache.ByObject{}
	filters := map[schema.GroupVersionKind]Filter{}
	for _, w := range ws {
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(w.GroupVersionKind)
		// The custom resources of w that this shard acts on and w's selector takes (an invalid
		// selector is reported when its reconciler is set up).
		sel := s.Selector()
		if watchSel, err := metav1.LabelSelectorAsSelector(w.Selector); err == nil {
			reqs, _ := watchSel.Requirements()
			sel = sel.Add(reqs...)
		}
		byObject[cr] = cache.ByObject{Label: sel}
		filters[w.GroupVersionKind] = CustomResources(s.ClaimedByOther)
	}
	return cache.Options{
		DefaultNamespaces:    namespaces,
		DefaultLabelSelector: names.ManagedSelector(s.ManagedValue()),
		DefaultTransform:     StripManagedFields,
		ByObject:             byObject,
	}, NewCache(filters, Filter{Update: ReleaseObjectUpdates(ignoreBookkeeping)})
}
