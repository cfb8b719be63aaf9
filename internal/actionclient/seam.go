package actionclient

// The seam: helm-operator-plugins' reconciler speaks Helm 3's types, and this file is the only
// one of the operator that knows them. The reconciler holds a chart, hands it and the values to
// the action client, and reads releases back; its post hooks receive a release and its value
// translator returns Helm 3's values. Everything else runs on Helm 4.

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"github.com/operator-framework/helm-operator-plugins/pkg/hook"
	"github.com/operator-framework/helm-operator-plugins/pkg/values"
	v3action "helm.sh/helm/v3/pkg/action"
	v3chart "helm.sh/helm/v3/pkg/chart"
	v3chartutil "helm.sh/helm/v3/pkg/chartutil"
	v3release "helm.sh/helm/v3/pkg/release"
	v3driver "helm.sh/helm/v3/pkg/storage/driver"
	v3time "helm.sh/helm/v3/pkg/time"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/shard"
)

var (
	_ helmclient.ActionClientGetter = (*Client)(nil)
	_ helmclient.ActionInterface    = (*reconcile)(nil)
)

// ReconcilerChart is the chart the reconciler holds: the chart's metadata, which names it, and
// nothing it could render or coalesce. The reconciler coalesces the values with the chart it
// holds before it hands them over; Helm's install and upgrade coalesce them again with the
// chart the action client renders, and a default deleted by a null in the spec would come back
// from the first coalescing. Holding no values, the reconciler hands the values over as the
// translator returned them, and Helm coalesces once, as for `helm install -f`.
func ReconcilerChart(c *chart.Chart) v3chart.Chart {
	md := c.Metadata
	return v3chart.Chart{Metadata: &v3chart.Metadata{APIVersion: md.APIVersion, Name: md.Name, Version: md.Version,
		AppVersion: md.AppVersion, Description: md.Description, Type: md.Type, KubeVersion: md.KubeVersion}}
}

// ActionClientFor implements helmclient.ActionClientGetter: the reconcile of obj begins.
func (c *Client) ActionClientFor(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok { // the reconciler reads every custom resource as unstructured
		return nil, fmt.Errorf("unsupported custom resource type %T", obj)
	}
	r, err := c.begin(ctx, u)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Translator is the reconciler's value translator: the values of the custom resource, which
// its reconcile's client built when it began, for the same resource at the same
// resourceVersion (a pure function of it: the same values, built once); built again otherwise.
// The reconciler calls it with the object it handed the getter, later in the same reconcile,
// and uses what it returns only to report a failure and to call the pre-hooks (none are
// registered): the actions use the values the reconcile began with.
func (c *Client) Translator() values.Translator {
	return values.TranslatorFunc(func(ctx context.Context, obj *unstructured.Unstructured) (v3chartutil.Values, error) {
		key := shard.Key{GVK: obj.GroupVersionKind(), NamespacedName: client.ObjectKeyFromObject(obj)}
		if b, ok := c.values.Take(key); ok && b.version == obj.GetResourceVersion() {
			return b.vals, b.err
		}
		return c.translate(ctx, obj)
	})
}

// PostHook is a post hook of the reconciler, which runs f after every successful install,
// upgrade and drift correction with the release it left.
func PostHook(f func(obj *unstructured.Unstructured, rel *release.Release) error) hook.PostHook {
	return hook.PostHookFunc(func(obj *unstructured.Unstructured, rel v3release.Release, _ logr.Logger) error {
		return f(obj, fromV3(&rel))
	})
}

// Get implements helmclient.ActionInterface.
func (r *reconcile) Get(name string, _ ...helmclient.GetOption) (*v3release.Release, error) {
	return v3(r.get(name))
}

// History implements helmclient.ActionInterface. The reconciler never asks for it, and a
// reconcile reads only the release's last revision.
func (r *reconcile) History(string, ...helmclient.HistoryOption) ([]*v3release.Release, error) {
	return nil, errors.New("the action client serves no release history")
}

// Install implements helmclient.ActionInterface; the chart is the kind's (Options.Chart).
func (r *reconcile) Install(_, _ string, _ *v3chart.Chart, _ map[string]any, opts ...helmclient.InstallOption) (*v3release.Release, error) {
	i, err := reconcilerOptions(opts)
	if err != nil {
		return nil, err
	}
	return v3(r.install(actionOptions{DisableHooks: i.DisableHooks, Description: i.Description}))
}

// Upgrade implements helmclient.ActionInterface: a dry run is the reconciler's check.
func (r *reconcile) Upgrade(_, _ string, _ *v3chart.Chart, _ map[string]any, opts ...helmclient.UpgradeOption) (*v3release.Release, error) {
	u, err := reconcilerOptions(opts)
	if err != nil {
		return nil, err
	}
	if u.DryRun {
		return v3(r.check())
	}
	return v3(r.upgrade(actionOptions{DisableHooks: u.DisableHooks, Description: u.Description, Force: u.Force}))
}

// Uninstall implements helmclient.ActionInterface.
func (r *reconcile) Uninstall(_ string, opts ...helmclient.UninstallOption) (*v3release.UninstallReleaseResponse, error) {
	u, err := reconcilerOptions(opts)
	if err != nil {
		return nil, err
	}
	rel, err := r.uninstall(actionOptions{DisableHooks: u.DisableHooks, Description: u.Description})
	if rel == nil {
		return nil, v3err(err)
	}
	return &v3release.UninstallReleaseResponse{Release: toV3(rel)}, v3err(err)
}

// reconcilerOptions applies the options the reconciler passed to a Helm 3 action, to read back
// what they set.
func reconcilerOptions[A any, O ~func(*A) error](opts []O) (*A, error) {
	var a A
	for _, o := range opts {
		if err := o(&a); err != nil {
			return nil, err
		}
	}
	return &a, nil
}

// Reconcile implements helmclient.ActionInterface: the drift correction of the release read.
func (r *reconcile) Reconcile(*v3release.Release) error { return v3err(r.reconcileObjects()) }

// Config implements helmclient.ActionInterface. The reconciler never asks for it: there is no
// Helm 3 configuration.
func (r *reconcile) Config() *v3action.Configuration { return nil }

func v3(rel *release.Release, err error) (*v3release.Release, error) { return toV3(rel), v3err(err) }

// v3err makes Helm 4's "release not found" Helm 3's, which the reconciler tests for.
func v3err(err error) error {
	if errors.Is(err, driver.ErrReleaseNotFound) && !errors.Is(err, v3driver.ErrReleaseNotFound) {
		return fmt.Errorf("%w (%w)", v3driver.ErrReleaseNotFound, err)
	}
	return err
}

// toV3 is rel as the reconciler and its post hooks read it: identity, status, notes, manifest,
// values, labels, and the chart's metadata. Hooks and the chart's files stay behind.
func toV3(rel *release.Release) *v3release.Release {
	if rel == nil {
		return nil
	}
	out := &v3release.Release{Name: rel.Name, Namespace: rel.Namespace, Version: rel.Version, Manifest: rel.Manifest,
		Config: rel.Config, Labels: rel.Labels}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		c := ReconcilerChart(rel.Chart)
		out.Chart = &c
	}
	if i := rel.Info; i != nil {
		out.Info = &v3release.Info{FirstDeployed: v3time.Time{Time: i.FirstDeployed}, LastDeployed: v3time.Time{Time: i.LastDeployed},
			Deleted: v3time.Time{Time: i.Deleted}, Description: i.Description, Status: v3release.Status(i.Status), Notes: i.Notes}
	}
	return out
}

// fromV3 is the inverse of toV3.
func fromV3(rel *v3release.Release) *release.Release {
	if rel == nil {
		return nil
	}
	out := &release.Release{Name: rel.Name, Namespace: rel.Namespace, Version: rel.Version, Manifest: rel.Manifest,
		Config: rel.Config, Labels: rel.Labels}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		md := rel.Chart.Metadata
		out.Chart = &chart.Chart{Metadata: &chart.Metadata{APIVersion: md.APIVersion, Name: md.Name, Version: md.Version,
			AppVersion: md.AppVersion, Description: md.Description, Type: md.Type, KubeVersion: md.KubeVersion}}
	}
	if i := rel.Info; i != nil {
		out.Info = &release.Info{FirstDeployed: i.FirstDeployed.Time, LastDeployed: i.LastDeployed.Time,
			Deleted: i.Deleted.Time, Description: i.Description, Status: common.Status(i.Status), Notes: i.Notes}
	}
	return out
}
