package manifestgen

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/hack/manifests/crdgen"
	"github.com/example/myproxy-operator/internal/chartapi"
)

// PreviewValues tells, for every custom resource the cluster of c stores, what its values would
// become once the CRD the charts make now replaces the one the cluster serves: converted to
// the chart's version as kind.yaml declares, then pruned, nulls dropped and defaults filled in as
// the apiserver would read it (crdgen.ValueChanges). A line per resource whose values change;
// lost says whether any loses a value it holds.
func PreviewValues(ctx context.Context, c client.Client, watchesPath string, o Options) (lines []string, lost bool, err error) {
	ws, err := o.watches(watchesPath)
	if err != nil {
		return nil, false, err
	}
	for _, w := range ws {
		decl, err := chartapi.LoadCompiled(w.ChartPath)
		if err != nil {
			return nil, false, err
		}
		ch, err := loader.Load(w.ChartPath)
		if err != nil {
			return nil, false, err
		}
		spec, err := specSchemaOf(w.ChartPath, ch, decl.Kind)
		if err != nil {
			return nil, false, err
		}
		crd, _, err := crdgen.Generate(w.GroupVersionKind, decl.Kind, spec.spec)
		if err != nil {
			return nil, false, err
		}
		served := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, served); err != nil {
			return nil, false, fmt.Errorf("reading the CRD %s the cluster serves: %w", crd.Name, err)
		}
		i := slices.IndexFunc(served.Spec.Versions, func(v apiextv1.CustomResourceDefinitionVersion) bool { return v.Storage })
		stored := schema.GroupVersionKind{Group: w.Group, Version: served.Spec.Versions[i].Name, Kind: w.Kind}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(stored.GroupVersion().WithKind(w.Kind + "List"))
		if err := c.List(ctx, list); err != nil {
			return nil, false, err
		}
		for _, cr := range list.Items {
			values, _, _ := unstructured.NestedMap(cr.Object, "spec")
			if stored.Version != w.Version {
				if values, err = decl.Convert(values, stored.Version, w.Version, chartapi.Kept{}); err != nil {
					return nil, false, fmt.Errorf("%s %s/%s: %w", w.Kind, cr.GetNamespace(), cr.GetName(), err)
				}
			}
			changes, err := crdgen.ValueChanges(crd, values)
			if err != nil {
				return nil, false, err
			}
			for _, change := range changes {
				lines = append(lines, fmt.Sprintf("%s %s/%s: %s", w.Kind, cr.GetNamespace(), cr.GetName(), change))
				lost = lost || !strings.Contains(change, ": defaulted to ")
			}
		}
	}
	return lines, lost, nil
}
