// Package remembered is the one list of what the operator keeps in memory per custom resource:
// the digests its releases were rendered from, the objects their renderings looked up, the
// status controller's applied generations and parsed manifests, the release states behind the
// metrics, the releases known to be absent. Each store is registered once, with how to forget
// a resource and how many entries it holds. A resource found gone is forgotten by every store
// of its kind at once (Forget): a store that registers cannot be left out of the forgetting.
// The sizes are exported as myproxy_operator_tracked_entries{map}, which the soak test reads
// back to zero once no custom resource is left.
package remembered

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Key names a custom resource of one kind.
type Key struct {
	GVK schema.GroupVersionKind
	types.NamespacedName
}

// Store is one in-memory store of per-resource entries.
type Store struct {
	// Map names it in the metric.
	Map string
	// GVK is the kind whose resources it holds; empty for a store every kind shares.
	GVK schema.GroupVersionKind
	// Forget drops what it holds of a resource; nil for a store whose entries go on their own
	// (each with the action or write that made it), which is only counted.
	Forget func(Key)
	// Len is how many entries it holds.
	Len func() int
}

type storeID struct {
	Map string
	GVK schema.GroupVersionKind
}

// Registry holds the stores.
type Registry struct {
	mu     sync.Mutex
	stores map[storeID]Store
	desc   *prometheus.Desc
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{stores: map[storeID]Store{}, desc: prometheus.NewDesc("myproxy_operator_tracked_entries",
		"Entries of the operator's in-memory maps kept per custom resource (or per record written), by map.",
		[]string{"map"}, nil)}
}

// Default is the process's registry, registered with controller-runtime's metrics.
var Default = sync.OnceValues(func() (*Registry, error) {
	r := New()
	return r, crmetrics.Registry.Register(r)
})

// Add registers s, in place of a store of the same map and kind (that of a manager built
// before, when the operator campaigns for leadership again).
func (r *Registry) Add(s Store) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stores[storeID{Map: s.Map, GVK: s.GVK}] = s
}

// Forget drops k from every store that holds resources of its kind.
func (r *Registry) Forget(k Key) {
	r.mu.Lock()
	stores := make([]Store, 0, len(r.stores))
	for id, s := range r.stores {
		if s.Forget != nil && (id.GVK.Empty() || id.GVK == k.GVK) {
			stores = append(stores, s)
		}
	}
	r.mu.Unlock()
	for _, s := range stores {
		s.Forget(k)
	}
}

// Sizes returns the entries of each map, summed over the kinds.
func (r *Registry) Sizes() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for id, s := range r.stores {
		out[id.Map] += s.Len()
	}
	return out
}

// Describe implements prometheus.Collector.
func (r *Registry) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

// Collect implements prometheus.Collector.
func (r *Registry) Collect(ch chan<- prometheus.Metric) {
	sizes := r.Sizes()
	names := make([]string, 0, len(sizes))
	for n := range sizes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, float64(sizes[n]), n)
	}
}
