package actionclient

import (
	"context"
	"errors"
	"strings"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/shard"
)

// updates records the updates of custom resources, answering err.
type updates struct {
	client.Writer
	owners []string
	err    error
}

func (u *updates) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	u.owners = append(u.owners, shard.Owner(obj))
	return u.err
}

// installs counts the installs that reach the plugins' client.
type installs struct {
	helmclient.ActionInterface
	n int
}

func (i *installs) Get(string, ...helmclient.GetOption) (*release.Release, error) {
	return nil, driver.ErrReleaseNotFound
}

func (i *installs) Install(string, string, *chart.Chart, map[string]any, ...helmclient.InstallOption) (*release.Release, error) {
	i.n++
	return &release.Release{}, nil
}

func crOwnedBy(owner string) *unstructured.Unstructured {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(crGVK)
	cr.SetNamespace(crKey.Namespace)
	cr.SetName(crKey.Name)
	if owner != "" {
		cr.SetLabels(map[string]string{shard.OwnerLabel: owner})
	}
	return cr
}

func claimedOver(base *installs, s shard.Shard, claims *shard.Claims, w client.Writer) helmclient.ActionClientGetter {
	return claimedWith(base, s, claims, w, nil)
}

func claimedWith(base *installs, s shard.Shard, claims *shard.Claims, w client.Writer, running shard.Liveness) helmclient.ActionClientGetter {
	return New(getterOf(base), Options{Shard: s, Claims: claims, Writer: w, Running: running, Recorder: record.NewFakeRecorder(100)})
}

func TestAReconcileActsOnlyOnWhatThisShardClaimed(t *testing.T) {
	a := shard.Shard{Name: "a", Fleet: []string{"a", "b"}}
	for _, tc := range []struct {
		name      string
		owner     string
		updateErr error
		running   shard.Liveness
		claims    []string // owners written
		refused   string   // in the error, when refused
	}{
		{name: "unclaimed: claimed, then acted on", owner: "", claims: []string{"a"}},
		{name: "its own: acted on", owner: "a"},
		{name: "another shard's: refused", owner: "b", refused: `shard "b" acts on it`},
		{name: "a stale claim of a shard not in the fleet: claimed", owner: "removed", claims: []string{"a"}},
		{name: "a claim of a shard not in the fleet that no longer runs: claimed", owner: "removed",
			running: runs(map[string]bool{"removed": false}), claims: []string{"a"}},
		{name: "a claim of a shard not in the fleet that runs: refused, naming --shards", owner: "c",
			running: runs(map[string]bool{"c": true}), refused: `shard "c" claims it and runs (its Lease is held), but is not in --shards [a b]`},
		{name: "whether the claiming shard runs cannot be read: refused", owner: "c",
			running: func(context.Context, string) (bool, error) { return false, errors.New("forbidden") },
			refused: `reading whether shard "c", which claims it, runs: forbidden`},
		{name: "a shard of the fleet is not asked about", owner: "b",
			running: func(context.Context, string) (bool, error) { panic("asked") }, refused: `shard "b" acts on it`},
		{name: "a concurrent change: the claim fails", owner: "", updateErr: apierrors.NewConflict(schema.GroupResource{}, "p", errors.New("changed")),
			claims: []string{"a"}, refused: "claiming it for shard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, base := &updates{err: tc.updateErr}, &installs{}
			ac, err := claimedWith(base, a, shard.NewClaims(), w, tc.running).ActionClientFor(context.Background(), crOwnedBy(tc.owner))
			if strings.Join(w.owners, ",") != strings.Join(tc.claims, ",") {
				t.Errorf("claims written %v, want %v", w.owners, tc.claims)
			}
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Errorf("error %v, want one saying %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ac.Install("p", "ns", nil, nil); err != nil || base.n != 1 {
				t.Errorf("install: %v, %d reached Helm", err, base.n)
			}
		})
	}
}

// runs answers for the shards it knows.
func runs(live map[string]bool) shard.Liveness {
	return func(_ context.Context, id string) (bool, error) { return live[id], nil }
}

func TestAReconcileStartsNothingAfterAHandover(t *testing.T) {
	a := shard.Shard{Name: "a", Fleet: []string{"a"}}
	claims, base := shard.NewClaims(), &installs{}
	ac, err := claimedOver(base, a, claims, &updates{}).ActionClientFor(context.Background(), crOwnedBy("a"))
	if err != nil {
		t.Fatal(err)
	}
	if !claims.Release(shard.Key{GVK: crGVK, NamespacedName: crKey}) {
		t.Fatal("nothing in flight, yet not released")
	}
	if _, err := ac.Install("p", "ns", nil, nil); !errors.Is(err, shard.ErrHandedOver) || base.n != 0 {
		t.Errorf("install after the handover: %v, %d reached Helm", err, base.n)
	}
	// A lagging cache may still show the resource as this shard's: that is no new claim.
	ac, err = claimedOver(base, a, claims, &updates{}).ActionClientFor(context.Background(), crOwnedBy("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Install("p", "ns", nil, nil); !errors.Is(err, shard.ErrHandedOver) || base.n != 0 {
		t.Errorf("install from a lagging copy after the handover: %v, %d reached Helm", err, base.n)
	}
	// Claimed afresh (the resource came back, unclaimed), it is acted on again.
	ac, err = claimedOver(base, a, claims, &updates{}).ActionClientFor(context.Background(), crOwnedBy(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Install("p", "ns", nil, nil); err != nil || base.n != 1 {
		t.Errorf("install once claimed again: %v, %d reached Helm", err, base.n)
	}
}

func TestNotShardedClaimsNothing(t *testing.T) {
	w, base := &updates{}, &installs{}
	ac, err := claimedOver(base, shard.Shard{}, nil, w).ActionClientFor(context.Background(), crOwnedBy("b"))
	if err != nil || len(w.owners) > 0 {
		t.Fatalf("not sharded: error %v, claims %v", err, w.owners)
	}
	if _, err := ac.Install("p", "ns", nil, nil); err != nil || base.n != 1 {
		t.Errorf("install: %v, %d reached Helm", err, base.n)
	}
}
