package shard

import (
	"cmp"
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
		return held(lease, now()), nil
	}
}

// held reports whether lease has a holder that renewed it less than two lease durations
// before now.
func held(lease *coordinationv1.Lease, now time.Time) bool {
	s := lease.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.LeaseDurationSeconds == nil {
		return false
	}
	renewed := cmp.Or(s.RenewTime, s.AcquireTime) // the last renewal, else the acquisition
	if renewed == nil {
		return false
	}
	return now.Before(renewed.Add(2 * time.Duration(*s.LeaseDurationSeconds) * time.Second))
}
