package actionclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"github.com/operator-framework/helm-operator-plugins/pkg/manifestutil"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/annotations"
)

// RollbackChoice is an action client getter that hands out Forced's action clients, whose
// failed upgrades roll back with --force as the stock operators' do, unless the custom
// resource's rollback-force annotation is false: then Unforced's. The plugins fix rollback
// options per getter, so each choice is a getter of its own.
type RollbackChoice struct {
	Forced, Unforced helmclient.ActionClientGetter
}

// ActionClientFor implements helmclient.ActionClientGetter.
func (r RollbackChoice) ActionClientFor(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
	if annotations.Bool(obj, annotations.RollbackForce, true) {
		return r.Forced.ActionClientFor(ctx, obj)
	}
	return r.Unforced.ActionClientFor(ctx, obj)
}

// ChartCopies returns a getter whose action clients hand Helm's install and upgrade (dry runs
// included) a copy of the chart they are given.
//
// Helm edits the chart it renders: it removes the subcharts that the values switch off, with
// their Chart.yaml entries, renames aliased ones and records imported values. The reconciler
// hands one chart to every action of a kind, so the first release that switched a subchart off
// would remove it for every later release of the kind, until a restart, and two concurrent
// actions would edit it at once. The stock operator loads the chart from disk for every
// reconcile. The copy is of the structure Helm edits (the charts, their metadata and
// dependency entries); templates, files and values, which Helm only reads, are shared.
func ChartCopies(next helmclient.ActionClientGetter) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil {
			return nil, err
		}
		return chartCopying{ac}, nil
	})
}

type chartCopying struct {
	helmclient.ActionInterface
}

func (c chartCopying) Install(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.InstallOption) (*release.Release, error) {
	return c.ActionInterface.Install(name, namespace, copyChart(chrt), vals, opts...)
}

func (c chartCopying) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.UpgradeOption) (*release.Release, error) {
	return c.ActionInterface.Upgrade(name, namespace, copyChart(chrt), vals, opts...)
}

// copyChart copies c, its metadata, its dependency entries and, recursively, its subcharts.
func copyChart(c *chart.Chart) *chart.Chart {
	if c == nil {
		return nil
	}
	out := *c
	if c.Metadata != nil {
		md := *c.Metadata
		md.Dependencies = make([]*chart.Dependency, len(c.Metadata.Dependencies))
		for i, d := range c.Metadata.Dependencies {
			if d != nil {
				dep := *d
				md.Dependencies[i] = &dep
			}
		}
		out.Metadata = &md
	}
	subcharts := make([]*chart.Chart, 0, len(c.Dependencies()))
	for _, sub := range c.Dependencies() {
		subcharts = append(subcharts, copyChart(sub))
	}
	out.SetDependencies(subcharts...)
	return &out
}

// WaitingForDeletionError says that an uninstall is done but objects of the release are still
// being deleted, and the custom resource keeps its finalizer until they are gone.
type WaitingForDeletionError struct {
	Release   string
	Remaining []string
}

func (e *WaitingForDeletionError) Error() string {
	return fmt.Sprintf("%s=true: release %s is uninstalled; waiting until all its objects are deleted (still present: %s)",
		annotations.UninstallWait, e.Release, strings.Join(e.Remaining, ", "))
}

// deleteHooks deletes the hook objects of an uninstalled release that its chart does not keep
// (helm.sh/resource-policy: keep), through Helm's own client (the release's reach and identity
// apply); absent ones are skipped. Helm's uninstall leaves hooks to their delete policy; the
// stock operator-sdk helm-operator gives them an owner reference to the custom resource, so the
// garbage collector takes them after it; helm-operator-plugins owns only the manifest. This does
// not depend on the garbage collector.
func deleteHooks(kc kube.Interface, rel *release.Release) error {
	var manifests []string
	for _, h := range rel.Hooks {
		manifests = append(manifests, h.Manifest)
	}
	if len(manifests) == 0 {
		return nil
	}
	objs, err := kc.Build(strings.NewReader(strings.Join(manifests, "\n---\n")), false)
	if err != nil {
		return err
	}
	objs = objs.Filter(func(info *resource.Info) bool {
		a, err := meta.NewAccessor().Annotations(info.Object)
		return err == nil && !manifestutil.HasResourcePolicyKeep(a)
	})
	if len(objs) == 0 {
		return nil
	}
	_, errs := kc.Delete(objs)
	return errors.Join(errs...)
}
