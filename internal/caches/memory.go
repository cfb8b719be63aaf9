package caches

import (
	"maps"
	"slices"
	"strings"
	"sync"

	sdkhandler "github.com/operator-framework/operator-lib/handler"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/example/myproxy-operator/internal/shard"
)

// StripManagedFields drops managed fields, often the larger part of an object, from objects
// entering a cache. It does what cache.TransformStripManagedFields does, but for unstructured
// objects it deletes the field instead of first decoding the whole list to know whether it is
// there: every watch event of every cached custom resource passes through here.
func StripManagedFields(in any) (any, error) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
		return in, nil
	}
	return cache.TransformStripManagedFields()(in)
}

// Identity keeps of an object's metadata only which object it is and whether it changed (name,
// namespace, UID, resourceVersion, deletion): for metadata caches whose readers need nothing
// more, where labels, annotations and managed fields of every object of a kind would otherwise
// stay in memory.
func Identity(obj any) (any, error) { return identity(obj, false), nil }

// IdentityAndLinks is Identity that also keeps labels and owner references, for readers that
// find an object's owner through them.
func IdentityAndLinks(obj any) (any, error) { return identity(obj, true), nil }

func identity(obj any, links bool) any {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj
	}
	kept := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID,
		ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp}
	if links {
		kept.Labels, kept.OwnerReferences = m.Labels, m.OwnerReferences
	}
	m.ObjectMeta = kept
	return m
}

// The Go type the manager's cache holds the objects of a release in: kinds the scheme knows
// (Deployments, Services, ConfigMaps...) as their typed structs, other kinds as unstructured
// objects. The objects of a fleet's releases are most of what the operator holds in memory, and
// nested maps take about twice the memory of the same object as a struct. Every watch of release
// objects must ask ReleaseObject for its object, so that one kind has one informer.

// ReleaseObject returns an empty object of the kind, in the type the cache holds it in.
func ReleaseObject(scheme *runtime.Scheme, gvk schema.GroupVersionKind) client.Object {
	if o, err := scheme.New(gvk); err == nil {
		if obj, ok := o.(client.Object); ok {
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			return obj
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// Content returns the object as the nested maps of its JSON form, with its apiVersion and kind
// (objects read from a cache of typed objects may have none). An unstructured object's own
// content is returned, not a copy: callers only read it.
func Content(obj client.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		return u.UnstructuredContent(), nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return m, nil
}

// OwnerRequests maps a release object to the custom resource of kind owner it points at, as
// the kube client points it (package helmconfig): its controller reference (in the object's own
// namespace, for a namespaced owner), or, byAnnotations, operator-sdk's owner annotations
// where it carries no reference. It reads as controller-runtime's EnqueueRequestForOwner
// (OnlyControllerOwner) and operator-lib's EnqueueRequestForAnnotation read.
func OwnerRequests(owner schema.GroupKind, namespaced, byAnnotations bool) func(client.Object) []reconcile.Request {
	return func(obj client.Object) []reconcile.Request {
		if ref := metav1.GetControllerOf(obj); ref != nil {
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil || ref.Kind != owner.Kind || gv.Group != owner.Group {
				return nil
			}
			key := types.NamespacedName{Name: ref.Name}
			if namespaced {
				key.Namespace = obj.GetNamespace()
			}
			return []reconcile.Request{{NamespacedName: key}}
		}
		a := obj.GetAnnotations()
		if !byAnnotations || a[sdkhandler.TypeAnnotation] != owner.String() || strings.TrimSpace(a[sdkhandler.NamespacedNameAnnotation]) == "" {
			return nil
		}
		ns, name, found := strings.Cut(a[sdkhandler.NamespacedNameAnnotation], "/")
		if !found {
			ns, name = "", ns
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	}
}

// Remembered is the one registry of what the operator keeps in memory per custom resource: the
// digests its releases were rendered from, the objects their renderings looked up, the status
// controller's applied generations, the release states behind the metrics, the rollout's holds,
// the values of a reconcile in flight. Every such store is a Store made by NewStore, which
// registers it: a resource found gone is forgotten by every store of its kind at once (Forget),
// and none can be left out. TestEveryPerResourceMapIsAStore fails on a map keyed by a custom
// resource that is not one. The sizes are exported as myproxy_operator_tracked_entries{map},
// which the soak test reads back to zero once no custom resource is left.

// Remembered holds the stores.
type Remembered struct {
	mu     sync.Mutex
	stores map[storeID]registered
	desc   *prometheus.Desc
}

type storeID struct {
	Map string
	GVK schema.GroupVersionKind
}

// registered is one store: how to forget a resource (nil: its entries go on their own, each
// with the write that made it; it is only counted) and how many entries it holds.
type registered struct {
	forget func(shard.Key)
	len    func() int
}

// NewRemembered returns an empty registry.
func NewRemembered() *Remembered {
	return &Remembered{stores: map[storeID]registered{}, desc: prometheus.NewDesc("myproxy_operator_tracked_entries",
		"Entries of the operator's in-memory maps kept per custom resource (or per record written), by map.",
		[]string{"map"}, nil)}
}

// ProcessRemembered is the process's registry, registered with controller-runtime's metrics.
var ProcessRemembered = sync.OnceValues(func() (*Remembered, error) {
	r := NewRemembered()
	return r, crmetrics.Registry.Register(r)
})

// Register adds a store that is not a Store: forget drops a resource (gvk's, or any kind's when
// gvk is empty), length counts its entries. A store of the same name and kind is replaced (that
// of a manager built before, when the operator campaigns for leadership again).
func (r *Remembered) Register(name string, gvk schema.GroupVersionKind, forget func(shard.Key), length func() int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stores[storeID{Map: name, GVK: gvk}] = registered{forget: forget, len: length}
}

// Forget drops k from every store that holds resources of its kind.
func (r *Remembered) Forget(k shard.Key) {
	r.mu.Lock()
	var forget []func(shard.Key)
	for id, s := range r.stores {
		if s.forget != nil && (id.GVK.Empty() || id.GVK == k.GVK) {
			forget = append(forget, s.forget)
		}
	}
	r.mu.Unlock()
	for _, f := range forget {
		f(k)
	}
}

// Sizes returns the entries of each map, summed over the kinds.
func (r *Remembered) Sizes() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for id, s := range r.stores {
		out[id.Map] += s.len()
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

// Store holds a V per custom resource, and forgets it with the resource.
type Store[V any] struct {
	mu sync.Mutex
	m  map[shard.Key]V
}

// NewStore returns a store registered in r (nil: in none, for tests) under name, holding
// resources of gvk (empty: of every kind).
func NewStore[V any](r *Remembered, name string, gvk schema.GroupVersionKind) *Store[V] {
	s := &Store[V]{m: map[shard.Key]V{}}
	if r != nil {
		r.Register(name, gvk, s.Delete, s.Len)
	}
	return s
}

// Get returns k's entry.
func (s *Store[V]) Get(k shard.Key) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	return v, ok
}

// Set sets k's entry.
func (s *Store[V]) Set(k shard.Key, v V) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = v
}

// Delete drops k's entry.
func (s *Store[V]) Delete(k shard.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
}

// Take returns k's entry and drops it.
func (s *Store[V]) Take(k shard.Key) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	delete(s.m, k)
	return v, ok
}

// Len returns the number of entries.
func (s *Store[V]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// TakeIf drops the entries f holds true of, and returns their resources.
func (s *Store[V]) TakeIf(f func(V) bool) []shard.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	var taken []shard.Key
	for k, v := range s.m {
		if f(v) {
			taken = append(taken, k)
			delete(s.m, k)
		}
	}
	return taken
}
