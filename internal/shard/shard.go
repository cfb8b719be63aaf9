// Package shard divides one fleet of custom resources among several operator Deployments, on
// Kubernetes' own primitives, as Flux's controllers do with their sharding label:
//
//   - a user picks a resource's shard with the label Label; every shard's caches select only its
//     resources (a label selector), and only its release objects (the managed label carries the
//     shard, names.ManagedLabel), so memory divides with the fleet;
//   - the default shard owns the resources whose label names no shard of the fleet (none, or a
//     shard that does not exist): no resource is left without an owner;
//   - each shard elects its leader on a Lease of its own, so a shard's standby replica takes over
//     its resources, and only them, when its leader dies;
//   - a resource moved from one shard to another is handed over, never acted on by two: the
//     shard acting on it names itself in the label OwnerLabel (a write with the resource
//     version as precondition, so one claim wins); a shard follows the resources that name it
//     (a metadata watch on that label), and clears the label of those its selector no longer
//     picks once nothing of its own is in flight on them (Claims), also those moved while it
//     was down; only then may the new shard claim it. A claim naming a shard that is not in
//     the fleet is stale and taken over, unless that shard's Lease is held (Liveness): then
//     the shards disagree on the fleet, and the resource waits. The release stays as it is,
//     its objects relabelled for the new shard's cache (a drift correction), not reinstalled.
package shard

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
)

const (
	// Label names the shard that owns a custom resource; users set it.
	Label = "myproxy-operator.gateway.example.com/shard"
	// OwnerLabel names the shard acting on a custom resource; the operator sets it.
	OwnerLabel = "myproxy-operator.gateway.example.com/owner-shard"
	// DefaultID is the default shard's name in OwnerLabel.
	DefaultID = "default"
)

// Shard is the part of the fleet this process owns.
type Shard struct {
	// Name is this process's shard; empty for the default shard (or when not sharded).
	Name string
	// Fleet names every shard but the default one; empty when the operator is not sharded.
	Fleet []string
}

// Validate reports a shard configuration that cannot work.
func (s Shard) Validate() error {
	for _, n := range s.Fleet {
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return fmt.Errorf("--shards: %q is not a valid shard name: %s", n, errs[0])
		}
		if n == DefaultID || n == names.ManagedValue {
			return fmt.Errorf("--shards: %q is reserved (the default shard owns the resources of no named shard)", n)
		}
	}
	if s.Name != "" && !slices.Contains(s.Fleet, s.Name) {
		return fmt.Errorf("--shard %q is not one of --shards %v", s.Name, s.Fleet)
	}
	return nil
}

// Sharded reports whether the fleet is divided among several Deployments.
func (s Shard) Sharded() bool { return len(s.Fleet) > 0 }

// ID is this shard's name in OwnerLabel.
func (s Shard) ID() string { return cmp.Or(s.Name, DefaultID) }

// Selector selects the custom resources this shard owns: all when not sharded; those labelled
// with its name; for the default shard, those labelled with no shard of the fleet.
func (s Shard) Selector() labels.Selector {
	if !s.Sharded() {
		return labels.Everything()
	}
	op, values := selection.NotIn, s.Fleet
	if s.Name != "" {
		op, values = selection.Equals, []string{s.Name}
	}
	req, err := labels.NewRequirement(Label, op, values)
	if err != nil { // names are validated
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}

// ManagedValue is the managed label value of this shard's release objects.
func (s Shard) ManagedValue() string { return cmp.Or(s.Name, names.ManagedValue) }

// LeaseName is the leader election Lease of this shard, from the operator's Lease name.
func (s Shard) LeaseName(base string) string {
	if s.Name == "" {
		return base
	}
	return base + "-" + s.Name
}

// Owner is the shard named in obj's claim, or "" when none claimed it.
func Owner(obj client.Object) string { return obj.GetLabels()[OwnerLabel] }

// InFleet reports whether id names a shard of the fleet (the default one included).
func (s Shard) InFleet(id string) bool { return id == DefaultID || slices.Contains(s.Fleet, id) }

// ClaimedByOther reports whether another shard of the fleet acts on obj: this shard must not
// touch it. A claim naming no shard of the fleet is stale (a shard since removed). Unsharded,
// the fleet is the default shard alone, this one: no claim names another.
func (s Shard) ClaimedByOther(obj client.Object) bool {
	o := Owner(obj)
	return o != "" && o != s.ID() && s.InFleet(o)
}

// Liveness reports whether the shard named id runs: its leader holds its Lease. A claim that
// names a shard outside this process's --shards is stale only if that shard does not run;
// if it does, the shards disagree on the fleet, and taking its resources over would let two
// shards act on one.
type Liveness func(ctx context.Context, id string) (bool, error)

// LeaseLiveness reads shard Leases from the apiserver: namespace and base are this process's
// leader election namespace and Lease name (Shard.LeaseName derives each shard's). A Lease is
// held while it names a holder and its last renewal is less than two lease durations old, by
// this process's clock: the margin covers clocks that disagree by up to a lease duration, and
// errs towards "runs" (a takeover waits, none happens twice).
func LeaseLiveness(r client.Reader, namespace, base string, now func() time.Time) Liveness {
	return func(ctx context.Context, id string) (bool, error) {
		lease := &coordinationv1.Lease{}
		key := client.ObjectKey{Namespace: namespace, Name: Shard{Name: id}.LeaseName(base)}
		if err := r.Get(ctx, key, lease); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		s := lease.Spec
		renewed := cmp.Or(s.RenewTime, s.AcquireTime) // the last renewal, else the acquisition
		if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.LeaseDurationSeconds == nil || renewed == nil {
			return false, nil
		}
		return now().Before(renewed.Add(2 * time.Duration(*s.LeaseDurationSeconds) * time.Second)), nil
	}
}
