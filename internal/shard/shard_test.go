package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestSelectorGivesEveryResourceOneShard(t *testing.T) {
	fleet := []string{"a", "b"}
	shards := []Shard{{Fleet: fleet}, {Name: "a", Fleet: fleet}, {Name: "b", Fleet: fleet}}
	for _, tc := range []struct {
		labels map[string]string
		owner  string
	}{
		{labels: nil, owner: DefaultID},
		{labels: map[string]string{"app": "x"}, owner: DefaultID},
		{labels: map[string]string{Label: "a"}, owner: "a"},
		{labels: map[string]string{Label: "b"}, owner: "b"},
		{labels: map[string]string{Label: "gone"}, owner: DefaultID}, // a shard that does not exist
		{labels: map[string]string{Label: ""}, owner: DefaultID},
	} {
		var owners []string
		for _, s := range shards {
			if s.Selector().Matches(labels.Set(tc.labels)) {
				owners = append(owners, s.ID())
			}
		}
		if len(owners) != 1 || owners[0] != tc.owner {
			t.Errorf("labels %v are selected by %v, want exactly %s", tc.labels, owners, tc.owner)
		}
	}
	if !(Shard{}).Selector().Empty() {
		t.Error("not sharded, the operator owns every resource")
	}
}

func TestNamesOfAShard(t *testing.T) {
	for _, tc := range []struct {
		shard              Shard
		id, managed, lease string
		sharded            bool
	}{
		{shard: Shard{}, id: DefaultID, managed: "true", lease: "op", sharded: false},
		{shard: Shard{Fleet: []string{"a"}}, id: DefaultID, managed: "true", lease: "op", sharded: true},
		{shard: Shard{Name: "a", Fleet: []string{"a"}}, id: "a", managed: "a", lease: "op-a", sharded: true},
	} {
		if tc.shard.ID() != tc.id || tc.shard.ManagedValue() != tc.managed || tc.shard.LeaseName("op") != tc.lease ||
			tc.shard.Sharded() != tc.sharded {
			t.Errorf("%+v: id %s, managed %s, lease %s, sharded %v", tc.shard, tc.shard.ID(), tc.shard.ManagedValue(),
				tc.shard.LeaseName("op"), tc.shard.Sharded())
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		shard Shard
		ok    bool
	}{
		{shard: Shard{}, ok: true},
		{shard: Shard{Fleet: []string{"a", "b"}}, ok: true},
		{shard: Shard{Name: "b", Fleet: []string{"a", "b"}}, ok: true},
		{shard: Shard{Name: "c", Fleet: []string{"a", "b"}}, ok: false},
		{shard: Shard{Name: "a"}, ok: false},
		{shard: Shard{Fleet: []string{"Upper"}}, ok: false},
		{shard: Shard{Fleet: []string{DefaultID}}, ok: false},
		{shard: Shard{Fleet: []string{"true"}}, ok: false},
	} {
		if err := tc.shard.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.shard, err)
		}
	}
}

func TestClaimedByOther(t *testing.T) {
	obj := func(owner string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if owner != "" {
			u.SetLabels(map[string]string{OwnerLabel: owner})
		}
		return u
	}
	a := Shard{Name: "a", Fleet: []string{"a", "b"}}
	for _, tc := range []struct {
		shard Shard
		owner string
		other bool
	}{
		{shard: a, owner: "", other: false},
		{shard: a, owner: "a", other: false},
		{shard: a, owner: "b", other: true},
		{shard: a, owner: DefaultID, other: true},
		{shard: a, owner: "removed", other: false}, // a stale claim: no such shard in the fleet
		{shard: Shard{Fleet: []string{"a"}}, owner: DefaultID, other: false},
		{shard: Shard{}, owner: "b", other: false}, // not sharded: the claim means nothing
	} {
		if got := tc.shard.ClaimedByOther(obj(tc.owner)); got != tc.other {
			t.Errorf("shard %q, owner %q: claimed by another %v", tc.shard.Name, tc.owner, got)
		}
	}
}

func TestClaimsHandOverOnlyWhenIdle(t *testing.T) {
	c := NewClaims()
	k := Key{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}}
	if err := c.Begin(k, false); err != nil {
		t.Fatal(err)
	}
	if c.Release(k) {
		t.Fatal("released while an action is in flight")
	}
	c.End(k)
	if !c.Release(k) {
		t.Fatal("not released once idle")
	}
	if err := c.Begin(k, false); !errors.Is(err, ErrHandedOver) {
		t.Fatalf("an action began after the handover: %v", err)
	}
	c.Reclaim(k)
	if err := c.Begin(k, false); err != nil {
		t.Fatalf("an action could not begin once reclaimed: %v", err)
	}
	c.End(k)
	if n := c.Len(); n != 0 {
		t.Errorf("%d entries left for a resource idle and owned", n)
	}
}

func TestAShardRunsWhileItsLeaseIsHeld(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	lease := func(name string, holder string, renewedAgo time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(15)),
				RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-renewedAgo)))},
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		lease("op-held", "pod-1", 5*time.Second),
		lease("op-skewed", "pod-2", 20*time.Second), // past its duration, within the clock margin
		lease("op-expired", "pod-3", time.Minute),
		lease("op-released", "", time.Second), // its leader stopped and released it
	).Build()
	running := LeaseLiveness(c, "system", "op", func() time.Time { return now })
	for id, want := range map[string]bool{"held": true, "skewed": true, "expired": false, "released": false, "absent": false} {
		got, err := running(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("shard %s runs: %t, want %t", id, got, want)
		}
	}
}
