package actionclient

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/shard"
)

// Lookups watches the metadata of the objects that renderings looked up and wakes the custom
// resources whose rendering read an object that changed, so that they are rendered again.
//
// Its cache holds only the identity of objects of the looked-up kinds, in the watched
// namespaces, and starts a kind's informer at its first lookup. An object outside those
// namespaces wakes nothing when it changes.
type Lookups struct {
	cache  cache.Cache
	mapper meta.RESTMapper
	wake   func(shard.Key)

	mu        sync.Mutex
	followers map[string]map[shard.Key]struct{} // Read.Key() -> custom resources whose rendering read it
	followed  map[shard.Key][]string            // custom resource -> keys it follows
	watched   map[schema.GroupVersionKind]bool
}

// NewLookups creates a Lookups over c, a metadata cache of the watched namespaces
// (caches.Lookups). wake is called, from an informer's goroutine, for each custom resource
// whose rendering read an object that changed.
func NewLookups(c cache.Cache, mapper meta.RESTMapper, wake func(shard.Key)) *Lookups {
	return &Lookups{cache: c, mapper: mapper, wake: wake,
		followers: map[string]map[shard.Key]struct{}{}, followed: map[shard.Key][]string{}, watched: map[schema.GroupVersionKind]bool{}}
}

// syncTimeout bounds the wait for a kind's informer to sync. An informer that cannot list its
// kind (no permission to list or watch it) never syncs; a reconcile must not hang on it.
const syncTimeout = 10 * time.Second

// Follow makes cr follow the objects its latest rendering read (and only those): a change to
// any of them wakes it.
func (t *Lookups) Follow(ctx context.Context, cr shard.Key, reads []helmconfig.Read) error {
	if t == nil {
		return nil
	}
	keys := make([]string, 0, len(reads))
	for _, rd := range reads {
		keys = append(keys, rd.Key())
	}
	t.mu.Lock()
	t.unfollowLocked(cr)
	if len(keys) > 0 {
		t.followed[cr] = keys
	}
	for _, k := range keys {
		if t.followers[k] == nil {
			t.followers[k] = map[shard.Key]struct{}{}
		}
		t.followers[k][cr] = struct{}{}
	}
	t.mu.Unlock()
	for _, rd := range reads {
		if err := t.watch(ctx, rd.Resource); err != nil {
			return fmt.Errorf("watching %s, which the rendering looked up: %w", rd.Resource, err)
		}
	}
	return nil
}

// Forget drops what cr followed (its release is gone).
func (t *Lookups) Forget(cr shard.Key) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.unfollowLocked(cr)
	t.mu.Unlock()
}

// Following returns how many custom resources follow at least one object.
func (t *Lookups) Following() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.followed)
}

func (t *Lookups) unfollowLocked(cr shard.Key) {
	for _, k := range t.followed[cr] {
		delete(t.followers[k], cr)
		if len(t.followers[k]) == 0 {
			delete(t.followers, k)
		}
	}
	delete(t.followed, cr)
}

// watch starts, once per kind, the informer whose events wake followers.
func (t *Lookups) watch(ctx context.Context, gvr schema.GroupVersionResource) error {
	gvk, err := t.mapper.KindFor(gvr)
	if err != nil {
		return err
	}
	t.mu.Lock()
	done := t.watched[gvk]
	t.watched[gvk] = true
	t.mu.Unlock()
	if done {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	inf, err := t.cache.GetInformer(ctx, obj)
	if err == nil {
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { t.changed(gvr, o) },
			UpdateFunc: func(_, o any) { t.changed(gvr, o) },
			DeleteFunc: func(o any) { t.changed(gvr, o) },
		})
	}
	if err != nil {
		t.mu.Lock()
		delete(t.watched, gvk)
		t.mu.Unlock()
	}
	return err
}

// changed wakes the followers of an object: those that read it, and those that listed its
// namespace or the whole kind.
func (t *Lookups) changed(gvr schema.GroupVersionResource, obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	keys := []string{
		helmconfig.Read{Resource: gvr, Namespace: o.GetNamespace(), Name: o.GetName()}.Key(),
		helmconfig.Read{Resource: gvr, Namespace: o.GetNamespace()}.Key(),
	}
	if o.GetNamespace() != "" {
		keys = append(keys, helmconfig.Read{Resource: gvr}.Key())
	}
	var woken []shard.Key
	t.mu.Lock()
	for _, k := range keys {
		for cr := range t.followers[k] {
			woken = append(woken, cr)
		}
	}
	t.mu.Unlock()
	for _, cr := range woken {
		t.wake(cr)
	}
}
