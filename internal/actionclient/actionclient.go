// Package actionclient builds the Helm action clients helm-operator-plugins' reconciler uses,
// through its ActionClientGetter seam: a stack of layers over the plugins' own clients (Stack,
// in stack.go, lists them and why each stands where it does). This file holds Observed, which
// reports the outcome of every Helm action to observers: Kubernetes Events on the resource
// (events.go) and Prometheus metrics (metrics.go), which the upstream reconciler lacks.
package actionclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Action names a Helm action.
type Action string

// The actions the reconciler performs. Check is the server-side dry-run upgrade the reconciler
// runs to decide whether an upgrade is needed; Reconcile restores drifted objects.
const (
	Get       Action = "get"
	Install   Action = "install"
	Upgrade   Action = "upgrade"
	Check     Action = "check"
	Uninstall Action = "uninstall"
	Reconcile Action = "reconcile"
	Client    Action = "client" // creating the action client itself
)

// Outcome is what one Helm action did.
type Outcome struct {
	Object   client.Object // the custom resource
	Action   Action
	Release  string           // release name
	Result   *release.Release // nil when the action returns none
	Chart    *chart.Chart     // for install, upgrade and check
	Err      error
	Duration time.Duration
}

// Observer is told the outcome of every Helm action.
type Observer interface {
	Observe(Outcome)
}

// Observed returns a getter whose action clients report every action to the observers.
func Observed(next helmclient.ActionClientGetter, observers ...Observer) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		start := time.Now()
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil {
			notify(observers, Outcome{Object: obj, Action: Client, Release: obj.GetName(), Err: err, Duration: time.Since(start)})
			return nil, err
		}
		return &observedClient{ActionInterface: ac, obj: obj, observers: observers}, nil
	})
}

func notify(observers []Observer, o Outcome) {
	for _, ob := range observers {
		ob.Observe(o)
	}
}

type observedClient struct {
	helmclient.ActionInterface
	obj       client.Object
	observers []Observer
}

func (c *observedClient) report(action Action, name string, rel *release.Release, chrt *chart.Chart, err error, start time.Time) {
	notify(c.observers, Outcome{Object: c.obj, Action: action, Release: name, Result: rel, Chart: chrt, Err: err,
		Duration: time.Since(start)})
}

func (c *observedClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	start := time.Now()
	rel, err := c.ActionInterface.Get(name, opts...)
	c.report(Get, name, rel, nil, err, start)
	return rel, err
}

func (c *observedClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.InstallOption) (*release.Release, error) {
	start := time.Now()
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	c.report(Install, name, rel, chrt, err, start)
	return rel, err
}

func (c *observedClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.UpgradeOption) (*release.Release, error) {
	start := time.Now()
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	action := Upgrade
	if isDryRun(opts) {
		action = Check
	}
	c.report(action, name, rel, chrt, err, start)
	return rel, err
}

func (c *observedClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	start := time.Now()
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	var rel *release.Release
	if resp != nil {
		rel = resp.Release
	}
	c.report(Uninstall, name, rel, nil, err, start)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		// The reconciler puts this in the ReleaseFailed condition; Helm's own words alone
		// ("no release provided") do not say what is at stake.
		err = fmt.Errorf("uninstalling release %s failed; the resource keeps its finalizer, and the release "+
			"its objects, until an uninstall succeeds: %w", name, err)
	}
	return resp, err
}

func (c *observedClient) Reconcile(rel *release.Release) error {
	start := time.Now()
	err := c.ActionInterface.Reconcile(rel)
	c.report(Reconcile, rel.Name, rel, nil, err, start)
	return err
}

// isDryRun applies the upgrade options to a scratch action to learn whether this is a dry run.
// named returns rel when it is the release called name (what a Get before returned), else nil.
func named(rel *release.Release, name string) *release.Release {
	if rel != nil && rel.Name != name {
		return nil
	}
	return rel
}

func isDryRun(opts []helmclient.UpgradeOption) bool {
	var u action.Upgrade
	for _, o := range opts {
		if err := o(&u); err != nil {
			return false
		}
	}
	return u.DryRun
}
