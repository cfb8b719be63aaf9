package manifestgen

import (
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/example/myproxy-operator/hack/manifests/chartrender"
)

// The release a chart is rendered as besides chartrender's sample one, in the sample namespace
// and in another: an object of the same kind, namespace and name in both renderings has a name
// the release does not give.
const (
	otherRelease   = "other-release"
	otherNamespace = "other-namespace"
)

// fixedNames returns the objects the chart names without the release's name, in each rendering:
// those two releases in one namespace would both write (a second custom resource of the kind
// in a namespace renders the first one's objects), and among them those two releases anywhere
// in the cluster would (cluster-scoped ones, or ones in a namespace the chart names).
func fixedNames(ch *chart.Chart, renderings []chartrender.Rendering) (perNamespace, perCluster []string, err error) {
	for _, r := range renderings {
		sameNamespace, err := chartrender.RenderValuesAs(ch, r.Values, otherRelease, chartrender.SampleNamespace)
		if err != nil {
			return nil, nil, fmt.Errorf("rendering the chart as release %s: %w", otherRelease, err)
		}
		elsewhere, err := chartrender.RenderValuesAs(ch, r.Values, otherRelease, otherNamespace)
		if err != nil {
			return nil, nil, fmt.Errorf("rendering the chart as release %s in namespace %s: %w", otherRelease, otherNamespace, err)
		}
		inNamespace, inCluster := identities(sameNamespace), identities(elsewhere)
		for id, shown := range identities(r.Objects) {
			switch {
			case inCluster[id] != "":
				perCluster = appendNew(perCluster, shown)
			case inNamespace[id] != "":
				perNamespace = appendNew(perNamespace, shown)
			}
		}
	}
	perNamespace = slices.DeleteFunc(perNamespace, func(s string) bool { return slices.Contains(perCluster, s) })
	return perNamespace, perCluster, nil
}

// identities are the rendered objects by kind, namespace (none for a cluster-scoped kind) and
// name, each as make manifests shows it: kind and name, the namespace too where the chart names
// one other than the release's.
func identities(objs []map[string]any) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		gk, name, ns := identityOf(o)
		shown := gk.Kind + " " + name
		switch {
		case clusterScoped[gk]:
			ns = ""
		case ns != chartrender.SampleNamespace && ns != otherNamespace:
			shown = gk.Kind + " " + ns + "/" + name
		}
		out[strings.Join([]string{gk.String(), ns, name}, "/")] = shown
	}
	return out
}
