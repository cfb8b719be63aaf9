// Package ownwrites remembers what this process itself deleted or wrote, so that watches can
// tell the operator's own changes from everyone else's: a deleted object of a release is drift
// to correct at once unless Helm deleted it (an uninstall, a rollback, an upgrade dropping it),
// and a release record changed by anyone but the operator (deleted, edited) needs a reconcile.
//
// A delete is remembered until the object is created again through this process, or expires
// (the event of a delete arrives within seconds, and several handlers may ask about it), so the
// registry stays as small as the writes in flight.
package ownwrites

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ttl bounds how long a delete is taken as own: informers deliver events within seconds, even
// under load.
const ttl = time.Minute

// Key names an object.
type Key struct {
	GroupKind schema.GroupKind
	types.NamespacedName
}

// Registry is the set of this process's deletes and record writes.
type Registry struct {
	mu      sync.Mutex
	now     func() time.Time
	deletes map[Key]time.Time
	writes  map[types.NamespacedName]written // release records: the last resourceVersion written
	pruned  time.Time
}

type written struct {
	resourceVersion string
	at              time.Time
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{now: time.Now, deletes: map[Key]time.Time{}, writes: map[types.NamespacedName]written{}}
}

// Deleting records that this process is about to delete an object.
func (r *Registry) Deleting(k Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	r.deletes[k] = r.now()
}

// OwnDelete reports whether a delete event is of an object this process deleted.
func (r *Registry) OwnDelete(k Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.deletes[k]
	return ok
}

// Created records that this process created an object again: a later delete is someone else's.
func (r *Registry) Created(k Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.deletes, k)
}

// Wrote records that this process wrote a record, which now has the resourceVersion.
func (r *Registry) Wrote(name types.NamespacedName, resourceVersion string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	r.writes[name] = written{resourceVersion: resourceVersion, at: r.now()}
}

// OwnWrite reports whether a record at this resourceVersion is this process's write.
func (r *Registry) OwnWrite(name types.NamespacedName, resourceVersion string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.writes[name]
	return ok && w.resourceVersion == resourceVersion
}

// Len returns the number of entries held.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.deletes) + len(r.writes)
}

func (r *Registry) pruneLocked() {
	now := r.now()
	if now.Sub(r.pruned) < ttl/10 {
		return
	}
	r.pruned = now
	for k, at := range r.deletes {
		if now.Sub(at) > ttl {
			delete(r.deletes, k)
		}
	}
	for k, w := range r.writes {
		if now.Sub(w.at) > ttl {
			delete(r.writes, k)
		}
	}
}
