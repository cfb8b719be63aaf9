// Remembered is the one list of what the operator keeps in memory per custom resource:
// the digests its releases were rendered from, the objects their renderings looked up, the
// status controller's applied generations and parsed manifests, the release states behind the
// metrics, the releases known to be absent. Each store is registered once, with how to forget
// a resource and how many entries it holds. A resource found gone is forgotten by every store
// of its kind at once (Forget): a store that registers cannot be left out of the forgetting.
// The sizes are exported as myproxy_operator_tracked_entries{map}, which the soak test reads
// back to zero once no custom resource is left.

package controller

import (
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/example/myproxy-operator/internal/shard"
)

// RememberedStore is one in-memory store of per-resource entries.
type RememberedStore struct {
	// Map names it in the metric.
	Map string
	// GVK is the kind whose resources it holds; empty for a store every kind shares.
	GVK schema.GroupVersionKind
	// Forget drops what it holds of a resource; nil for a store whose entries go on their own
	// (each with the action or write that made it), which is only counted.
	Forget func(shard.Key)
	// Len is how many entries it holds.
	Len func() int
}

type storeID struct {
	Map string
	GVK schema.GroupVersionKind
}

// Remembered holds the stores.
type Remembered struct {
	mu     sync.Mutex
	stores map[storeID]RememberedStore
	desc   *prometheus.Desc
}

// newRemembered returns an empty registry.
func newRemembered() *Remembered {
	return &Remembered{stores: map[storeID]RememberedStore{}, desc: prometheus.NewDesc("myproxy_operator_tracked_entries",
		"Entries of the operator's in-memory maps kept per custom resource (or per record written), by map.",
		[]string{"map"}, nil)}
}

// defaultRemembered is the process's registry, registered with controller-runtime's metrics.
var defaultRemembered = sync.OnceValues(func() (*Remembered, error) {
	r := newRemembered()
	return r, crmetrics.Registry.Register(r)
})

// Add registers s, in place of a store of the same map and kind (that of a manager built
// before, when the operator campaigns for leadership again).
func (r *Remembered) Add(stores ...RememberedStore) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range stores {
		r.stores[storeID{Map: s.Map, GVK: s.GVK}] = s
	}
}

// Forget drops k from every store that holds resources of its kind.
func (r *Remembered) Forget(k shard.Key) {
	r.mu.Lock()
	stores := make([]RememberedStore, 0, len(r.stores))
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
func (r *Remembered) Sizes() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for id, s := range r.stores {
		out[id.Map] += s.Len()
	}
	return out
}

// Describe implements prometheus.Collector.
func (r *Remembered) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

// Collect implements prometheus.Collector.
func (r *Remembered) Collect(ch chan<- prometheus.Metric) {
	sizes := r.Sizes()
	for _, n := range slices.Sorted(maps.Keys(sizes)) {
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, float64(sizes[n]), n)
	}
}
