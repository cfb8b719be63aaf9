package actionclient

import (
	"context"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
