package shard

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

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
