package actionclient

import (
	"context"
	"fmt"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/shard"
)

// Claimed returns a getter whose action clients act only on custom resources this shard has
// claimed (package shard). Not sharded, it is next itself.
//
// A resource no shard of the fleet claims is claimed first: this shard writes its name into
// the owner label, with the resource version as precondition (a concurrent claim or change
// fails the reconcile, which retries). A resource another shard claims is refused: that shard
// hands it over first (the cache filter keeps such resources from reaching the reconciler; this
// catches a cache that lags). Every call on the release is bracketed by Claims.Begin and End,
// so that the handover waits for this shard's calls in flight and no call starts after it. A
// resource that names this shard but was handed over stays refused: that is a lagging copy,
// not a new claim. A claim naming a shard outside the fleet is taken over only if that shard
// does not run (running, nil when there is no leader election: taken over): one that runs
// means the shards were started with different --shards, and the resource stays refused,
// with an error that says so, until they agree.
func Claimed(next helmclient.ActionClientGetter, s shard.Shard, claims *shard.Claims, writer client.Writer,
	running shard.Liveness) helmclient.ActionClientGetter {
	if !s.Sharded() {
		return next
	}
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		key := shard.Key{GVK: obj.GetObjectKind().GroupVersionKind(), NamespacedName: client.ObjectKeyFromObject(obj)}
		switch owner := shard.Owner(obj); {
		case owner == s.ID():
		case owner != "" && !s.InFleet(owner) && running != nil:
			live, err := running(ctx, owner)
			if err != nil {
				return nil, fmt.Errorf("reading whether shard %q, which claims it, runs: %w", owner, err)
			}
			if live {
				return nil, fmt.Errorf("shard %q claims it and runs (its Lease is held), but is not in --shards %v: "+
					"every shard must run with the same --shards", owner, s.Fleet)
			}
			fallthrough
		case owner == "" || !s.InFleet(owner):
			l := obj.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l[shard.OwnerLabel] = s.ID()
			obj.SetLabels(l)
			// An update carries the resource version read, so of two claims one fails.
			if err := writer.Update(ctx, obj); err != nil {
				return nil, fmt.Errorf("claiming it for shard %q: %w", s.ID(), err)
			}
			claims.Reclaim(key)
		default:
			return nil, fmt.Errorf("shard %q acts on it until it hands it over (label %s)", owner, shard.OwnerLabel)
		}
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil {
			return nil, err
		}
		return &claimedClient{ActionInterface: ac, claims: claims, key: key}, nil
	})
}

type claimedClient struct {
	helmclient.ActionInterface
	claims *shard.Claims
	key    shard.Key
}

// during runs f unless the resource was handed over since the reconcile began.
func during[T any](c *claimedClient, f func() (T, error)) (T, error) {
	if err := c.claims.Begin(c.key); err != nil {
		var zero T
		return zero, err
	}
	defer c.claims.End(c.key)
	return f()
}

func (c *claimedClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	return during(c, func() (*release.Release, error) { return c.ActionInterface.Get(name, opts...) })
}

func (c *claimedClient) History(name string, opts ...helmclient.HistoryOption) ([]*release.Release, error) {
	return during(c, func() ([]*release.Release, error) { return c.ActionInterface.History(name, opts...) })
}

func (c *claimedClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.InstallOption) (*release.Release, error) {
	return during(c, func() (*release.Release, error) {
		return c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	})
}

func (c *claimedClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.UpgradeOption) (*release.Release, error) {
	return during(c, func() (*release.Release, error) {
		return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	})
}

func (c *claimedClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	return during(c, func() (*release.UninstallReleaseResponse, error) { return c.ActionInterface.Uninstall(name, opts...) })
}

func (c *claimedClient) Reconcile(rel *release.Release) error {
	_, err := during(c, func() (struct{}, error) { return struct{}{}, c.ActionInterface.Reconcile(rel) })
	return err
}
