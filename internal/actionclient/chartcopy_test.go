package actionclient

import (
	"context"
	"slices"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// renderingClient does to the chart what Helm's install and upgrade do before rendering, and
// records which subcharts were left to render.
type renderingClient struct {
	helmclient.ActionInterface
	rendered [][]string
}

func (f *renderingClient) render(chrt *chart.Chart, vals map[string]any) (*release.Release, error) {
	if err := chartutil.ProcessDependenciesWithMerge(chrt, vals); err != nil {
		return nil, err
	}
	var names []string
	for _, sub := range chrt.Dependencies() {
		names = append(names, sub.Name())
	}
	f.rendered = append(f.rendered, names)
	return &release.Release{}, nil
}

func (f *renderingClient) Install(_, _ string, chrt *chart.Chart, vals map[string]any, _ ...helmclient.InstallOption) (*release.Release, error) {
	return f.render(chrt, vals)
}

func (f *renderingClient) Upgrade(_, _ string, chrt *chart.Chart, vals map[string]any, _ ...helmclient.UpgradeOption) (*release.Release, error) {
	return f.render(chrt, vals)
}

func umbrellaChart() *chart.Chart {
	sub := func(name string) *chart.Chart {
		return &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: name, Version: "0.1.0"}, Values: map[string]any{}}
	}
	c := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: "v2", Name: "umbrella", Version: "0.1.0", Dependencies: []*chart.Dependency{
			{Name: "backend", Version: "0.1.0"},
			{Name: "extra", Version: "0.1.0", Condition: "extra.enabled"},
			{Name: "backend", Alias: "second", Version: "0.1.0"},
		}},
		Values: map[string]any{"extra": map[string]any{"enabled": false}},
	}
	c.SetDependencies(sub("backend"), sub("extra"))
	return c
}

// One chart handed to every action, as the reconciler does: a subchart one release switches off
// is still there for the next, and the chart handed in is as it was.
// Without the copies, the second release misses the subchart: Helm's own edit, shown.
func TestChartCopiesKeepTheReconcilersChartAsLoaded(t *testing.T) {
	for _, copies := range []bool{false, true} {
		chrt := umbrellaChart()
		base := &renderingClient{}
		var getter helmclient.ActionClientGetter = helmclient.ActionClientGetterFunc(func(context.Context, client.Object) (helmclient.ActionInterface, error) {
			return base, nil
		})
		if copies {
			getter = ChartCopies(getter)
		}
		ac, err := getter.ActionClientFor(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ac.Install("a", "ns", chrt, map[string]any{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ac.Upgrade("b", "ns", chrt, map[string]any{"extra": map[string]any{"enabled": true}}); err != nil {
			t.Fatal(err)
		}
		second := base.rendered[1]
		if got := slices.Contains(second, "extra"); got != copies {
			t.Errorf("copies %v: the second release rendered %v: extra there %v, want %v", copies, second, got, copies)
		}
		if copies && (len(chrt.Dependencies()) != 2 || len(chrt.Metadata.Dependencies) != 3 || chrt.Metadata.Dependencies[2].Name != "backend") {
			t.Errorf("the chart handed in was edited: %d subcharts, entries %+v", len(chrt.Dependencies()), chrt.Metadata.Dependencies)
		}
	}
}
