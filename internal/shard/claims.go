package shard

import (
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ErrHandedOver is returned for an action on a custom resource this shard handed over.
var ErrHandedOver = errors.New("handed over to another shard")

// Key names a custom resource of one kind.
type Key struct {
	GVK schema.GroupVersionKind
	types.NamespacedName
}

// Claims tracks this shard's actions in flight per custom resource, so that it hands a
// resource over only when none is, and starts none after. A handed-over resource is remembered
// until it comes back (Reclaim): a reconcile that began before the handover may still try an
// action on it, however late.
type Claims struct {
	mu       sync.Mutex
	inflight map[Key]int
	released map[Key]bool
}

// NewClaims returns an empty registry.
func NewClaims() *Claims {
	return &Claims{inflight: map[Key]int{}, released: map[Key]bool{}}
}

// Begin starts an action on k, unless k was handed over and this shard is not about to claim
// it again (claiming); End must follow.
func (c *Claims) Begin(k Key, claiming bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released[k] && !claiming {
		return ErrHandedOver
	}
	c.inflight[k]++
	return nil
}

// End ends an action Begin started.
func (c *Claims) End(k Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight[k]--; c.inflight[k] <= 0 {
		delete(c.inflight, k)
	}
}

// Release marks k handed over if no action is in flight on it, and reports whether it did.
func (c *Claims) Release(k Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight[k] > 0 {
		return false
	}
	c.released[k] = true
	return true
}

// Reclaim lets actions on k begin again: this shard owns it (again).
func (c *Claims) Reclaim(k Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.released, k)
}

// Len is how many resources are handed over or have actions in flight.
func (c *Claims) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight) + len(c.released)
}
