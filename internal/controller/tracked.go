package controller

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// trackedEntries exports the size of every in-memory map the operator keeps per custom resource
// (myproxy_operator_tracked_entries{map}), summed over the kinds: with no custom resource left,
// every one is back to zero, which the soak test checks after creating and deleting a fleet.
type trackedEntries struct {
	mu      sync.Mutex
	sources map[string]map[string]func() int // map name -> kind -> its size
	desc    *prometheus.Desc
}

var tracked = sync.OnceValues(func() (*trackedEntries, error) {
	t := &trackedEntries{
		sources: map[string]map[string]func() int{},
		desc: prometheus.NewDesc("myproxy_operator_tracked_entries",
			"Entries of the operator's in-memory maps kept per custom resource (or per record written), by map.",
			[]string{"map"}, nil),
	}
	return t, crmetrics.Registry.Register(t)
})

// track sets how to read the size of a map of one kind (replacing the reader of a manager
// built before, when the operator campaigns for leadership again).
func (t *trackedEntries) track(mapName, kind string, size func() int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sources[mapName] == nil {
		t.sources[mapName] = map[string]func() int{}
	}
	t.sources[mapName][kind] = size
}

func (t *trackedEntries) Describe(ch chan<- *prometheus.Desc) { ch <- t.desc }

func (t *trackedEntries) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]string, 0, len(t.sources))
	for n := range t.sources {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		total := 0
		for _, size := range t.sources[n] {
			total += size()
		}
		ch <- prometheus.MustNewConstMetric(t.desc, prometheus.GaugeValue, float64(total), n)
	}
}
