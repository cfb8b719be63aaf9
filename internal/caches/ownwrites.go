// OwnWrites remembers what this process itself deleted or wrote, so that watches can tell the
// operator's own changes from everyone else's: a release record changed by anyone but the
// operator (deleted, edited) needs a reconcile; the operator's own writes of it do not, or a
// failed install would wake itself in a tight loop.
//
// A delete is remembered until it expires (the event of a delete arrives within seconds, and
// several handlers may ask about it), so the registry stays as small as the writes in flight.

package caches

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ttl bounds how long a delete is taken as own: informers deliver events within seconds, even
// under load.
const ttl = time.Minute

// OwnKey names an object.
type OwnKey struct {
	GroupKind schema.GroupKind
	types.NamespacedName
}

// OwnWrites is the set of this process's deletes and record writes.
type OwnWrites struct {
	mu      sync.Mutex
	now     func() time.Time
	deletes map[OwnKey]time.Time
	writes  map[types.NamespacedName][]written // release records: the resourceVersions recently written
	writing map[types.NamespacedName]int       // release records: writes sent and not yet answered
	pruned  time.Time
}

type written struct {
	resourceVersion string
	at              time.Time
}

// NewOwnWrites returns an empty registry.
func NewOwnWrites() *OwnWrites {
	return &OwnWrites{now: time.Now, deletes: map[OwnKey]time.Time{}, writes: map[types.NamespacedName][]written{},
		writing: map[types.NamespacedName]int{}}
}

// Deleting records that this process is about to delete an object.
func (r *OwnWrites) Deleting(k OwnKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	r.deletes[k] = r.now()
}

// OwnDelete reports whether a delete event is of an object this process deleted.
func (r *OwnWrites) OwnDelete(k OwnKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.deletes[k]
	return ok
}

// maxWrites bounds the resourceVersions kept per record: an action writes a record a few times
// in a row (pending, then its outcome), faster than the events of those writes arrive.
const maxWrites = 8

// Writing records that this process is sending a write of a record; Wrote must follow. The
// watch event of a write may arrive before its response: until then, any event of the record
// is taken as this write's.
func (r *OwnWrites) Writing(name types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writing[name]++
}

// Wrote records the answer to a write announced by Writing: the record's resourceVersion now,
// or "" when the write failed.
func (r *OwnWrites) Wrote(name types.NamespacedName, resourceVersion string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writing[name]--; r.writing[name] <= 0 {
		delete(r.writing, name)
	}
	if resourceVersion == "" {
		return
	}
	r.pruneLocked()
	ws := append(r.writes[name], written{resourceVersion: resourceVersion, at: r.now()})
	if len(ws) > maxWrites {
		ws = ws[len(ws)-maxWrites:]
	}
	r.writes[name] = ws
}

// OwnWrite reports whether a record at this resourceVersion is one of this process's writes
// (or may be: a write of it is on the wire).
func (r *OwnWrites) OwnWrite(name types.NamespacedName, resourceVersion string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writing[name] > 0 ||
		slices.ContainsFunc(r.writes[name], func(w written) bool { return w.resourceVersion == resourceVersion })
}

// Len returns the number of entries held (expired ones are dropped first).
func (r *OwnWrites) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	n := len(r.deletes) + len(r.writing)
	for _, ws := range r.writes {
		n += len(ws)
	}
	return n
}

func (r *OwnWrites) pruneLocked() {
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
	for k, ws := range r.writes {
		if now.Sub(ws[len(ws)-1].at) > ttl {
			delete(r.writes, k)
		}
	}
}
