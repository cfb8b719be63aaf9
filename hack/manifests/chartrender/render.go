// Package chartrender renders a chart offline, as `make manifests` and `make fuzz-chart` do
// (no cluster: lookups find nothing), with its default values and each ci/*-values.yaml, and
// checks its kind.yaml declarations against those renderings.
package chartrender

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/chartapi"
)

// Rendering is the chart rendered offline with one set of values.
type Rendering struct {
	// ValuesFile is the ci/*-values.yaml file the values come from ("" for the defaults).
	ValuesFile string
	// Values are the values given (the spec of a custom resource that would render so).
	Values  map[string]any
	Objects []map[string]any
	// LookedUp are the kinds the templates read with `lookup` in this rendering.
	LookedUp []schema.GroupVersionKind
}

// SampleNamespace is the namespace of the offline renderings' release.
const SampleNamespace = "default"

// sampleRelease names the offline renderings' release.
var sampleRelease = chartutil.ReleaseOptions{Name: "example", Namespace: SampleNamespace, Revision: 1, IsInstall: true}

// Render renders the chart offline (no cluster: lookups find nothing) with its default values
// and with each ci/*-values.yaml, the chart-testing convention for the value sets a chart must
// render with. A chart whose schema requires keys its values.yaml gives no default for renders
// with those keys filled in from the schema (requiredFilled), as a resource must give them; a
// rendering with the defaults that fails is skipped when the ci files render; a ci file that
// fails is an error.
func Render(chartDir string) ([]Rendering, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Rendering
	required := requiredFilled(ch)
	defaults, lookedUp, defaultsErr := render(ch, required, sampleRelease)
	if defaultsErr == nil {
		out = append(out, Rendering{Values: required, Objects: defaults, LookedUp: lookedUp})
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var vals map[string]any
		if err := yaml.Unmarshal(raw, &vals); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if vals == nil {
			vals = map[string]any{}
		}
		objs, lookedUp, err := render(ch, vals, sampleRelease)
		if err != nil {
			return nil, fmt.Errorf("%s: rendering the chart with these values: %w", f, err)
		}
		out = append(out, Rendering{ValuesFile: f, Values: vals, Objects: objs, LookedUp: lookedUp})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("rendering the chart with its default values: %w", defaultsErr)
	}
	return out, nil
}

// RenderValues renders the chart offline with vals, as Render does for each value set: the
// values are checked against values.schema.json first, lookups find nothing, and every
// object without a namespace is in SampleNamespace.
func RenderValues(ch *chart.Chart, vals map[string]any) ([]map[string]any, error) {
	objs, _, err := render(ch, vals, sampleRelease)
	return objs, err
}

// RenderValuesAs renders as RenderValues does, the release named name in namespace (where the
// objects without a namespace are).
func RenderValuesAs(ch *chart.Chart, vals map[string]any, name, namespace string) ([]map[string]any, error) {
	release := sampleRelease
	release.Name, release.Namespace = name, namespace
	objs, _, err := render(ch, vals, release)
	return objs, err
}

func render(ch *chart.Chart, vals map[string]any, release chartutil.ReleaseOptions) ([]map[string]any, []schema.GroupVersionKind, error) {
	values, err := chartutil.ToRenderValues(ch, vals, release, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, nil, err
	}
	lookups := &lookupRecorder{}
	files, err := engine.RenderWithClientProvider(ch, values, lookups)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var objs []map[string]any
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") && !strings.HasSuffix(name, ".json") {
			continue // NOTES.txt and helpers
		}
		docs := releaseutil.SplitManifests(files[name])
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(docs[k]), &obj); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", name, err)
			}
			if obj == nil {
				continue
			}
			if md, ok := obj["metadata"].(map[string]any); ok && md["namespace"] == nil {
				md["namespace"] = release.Namespace
			}
			objs = append(objs, obj)
		}
	}
	return objs, lookups.lookedUp(), nil
}

// LookedUp returns the kinds the renderings read with `lookup`, sorted.
func LookedUp(renderings []Rendering) []schema.GroupVersionKind {
	var all []schema.GroupVersionKind
	for _, r := range renderings {
		all = append(all, r.LookedUp...)
	}
	return sortedDistinct(all)
}

// Kinds returns the kinds the renderings create, sorted.
func Kinds(renderings []Rendering) []schema.GroupVersionKind {
	var all []schema.GroupVersionKind
	for _, r := range renderings {
		for _, o := range r.Objects {
			apiVersion, _ := o["apiVersion"].(string)
			kind, _ := o["kind"].(string)
			all = append(all, schema.FromAPIVersionAndKind(apiVersion, kind))
		}
	}
	return sortedDistinct(all)
}

func sortedDistinct(kinds []schema.GroupVersionKind) []schema.GroupVersionKind {
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].String() < kinds[j].String() })
	return slices.Compact(kinds)
}

// Check evaluates every expression against each rendering, once as the custom resource is
// before its objects exist (no objects) and once as they are just created (the rendered
// objects, without status). An expression that fails or gives the wrong type in either would
// leave a field out in a real cluster: the error names it, its file and line and the rendering.
func Check(c *chartapi.Compiled, gvk schema.GroupVersionKind, renderings []Rendering) error {
	var errs []error
	for _, r := range renderings {
		self := map[string]any{
			"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
			"metadata": map[string]any{"name": sampleRelease.Name, "namespace": sampleRelease.Namespace, "generation": int64(1)},
			"spec":     r.Values,
		}
		for _, objects := range [][]map[string]any{nil, r.Objects} {
			for _, err := range c.Evaluate(self, objects).Errors {
				state := "before the release's objects exist"
				if objects != nil {
					state = "with the release's objects not yet reconciled (no status)"
				}
				values := "default values"
				if r.ValuesFile != "" {
					values = r.ValuesFile
				}
				errs = append(errs, fmt.Errorf("%w (%s, %s)", err, values, state))
			}
		}
	}
	return errors.Join(errs...)
}

// LoadChecked loads, compiles and checks the declaration of the chart in chartDir for the kind:
// what `make manifests` does before it writes the CRD.
func LoadChecked(chartDir string, gvk schema.GroupVersionKind) (*chartapi.Compiled, error) {
	k, err := chartapi.Load(chartDir)
	if err != nil {
		return nil, err
	}
	if err := CheckShape(k); err != nil {
		return nil, fmt.Errorf("%s: %w", k.File, err)
	}
	if err := k.CheckVersions(gvk.Version); err != nil {
		return nil, err
	}
	c, err := chartapi.Compile(k)
	if err != nil {
		return nil, err
	}
	renderings, err := Render(chartDir)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", chartDir, err)
	}
	if err := Check(c, gvk, renderings); err != nil {
		return nil, err
	}
	return c, nil
}

// SwitchedOn renders the chart offline with every boolean value switched on: each boolean of
// its default values and each boolean property of its values.schema.json set to true (an
// `enabled: false` PodDisruptionBudget, Ingress or ServiceMonitor). Whoever may create a custom
// resource may switch them on, so `make manifests` grants what this rendering holds too. A
// chart whose switches exclude each other fails here; the error says so.
func SwitchedOn(chartDir string) (Rendering, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return Rendering{}, err
	}
	vals := requiredFilled(ch)
	switchOn(ch.Values, vals)
	if ch.Schema != nil {
		var doc map[string]any
		if err := yaml.Unmarshal(ch.Schema, &doc); err == nil {
			switchOnSchema(doc, vals)
		}
	}
	objs, lookedUp, err := render(ch, vals, sampleRelease)
	if err != nil {
		return Rendering{}, fmt.Errorf("rendering %s with every boolean value true: %w", chartDir, err)
	}
	return Rendering{ValuesFile: "every boolean value true", Values: vals, Objects: objs, LookedUp: lookedUp}, nil
}

// switchOn sets in out every boolean of defaults (at the same path) to true.
func switchOn(defaults, out map[string]any) {
	for k, v := range defaults {
		switch x := v.(type) {
		case bool:
			out[k] = true
		case map[string]any:
			child, _ := out[k].(map[string]any)
			if child == nil {
				child = map[string]any{}
			}
			switchOn(x, child)
			if len(child) > 0 {
				out[k] = child
			}
		}
	}
}

// switchOnSchema sets in out every boolean property of the schema node (objects followed
// through properties) to true.
func switchOnSchema(node, out map[string]any) {
	props, _ := node["properties"].(map[string]any)
	for k, v := range props {
		child, ok := v.(map[string]any)
		if !ok {
			continue
		}
		switch child["type"] {
		case "boolean":
			out[k] = true
		case "object":
			sub, _ := out[k].(map[string]any)
			if sub == nil {
				sub = map[string]any{}
			}
			switchOnSchema(child, sub)
			if len(sub) > 0 {
				out[k] = sub
			}
		}
	}
}

// requiredFilled returns the values a resource must give for the chart's schema to accept
// its values.yaml: each required key it gives no default for, filled with the first value the
// schema admits (its const, first enum value, minimum, or the type's zero value; an object with
// its own required keys filled in turn). Empty for a chart without a schema or such keys.
func requiredFilled(ch *chart.Chart) map[string]any {
	var doc map[string]any
	if ch.Schema == nil || json.Unmarshal(ch.Schema, &doc) != nil {
		return map[string]any{}
	}
	var fill func(node, defaults map[string]any) map[string]any
	fill = func(node, defaults map[string]any) map[string]any {
		out := map[string]any{}
		props, _ := node["properties"].(map[string]any)
		required, _ := node["required"].([]any)
		for _, r := range required {
			key, _ := r.(string)
			child, _ := props[key].(map[string]any)
			sub, given := defaults[key].(map[string]any)
			switch {
			case child == nil:
			case given || (defaults[key] == nil && child["type"] == "object"):
				if filled := fill(child, sub); len(filled) > 0 || !given {
					out[key] = filled
				}
			case defaults[key] != nil:
			case child["const"] != nil:
				out[key] = child["const"]
			case len(asList(child["enum"])) > 0:
				out[key] = asList(child["enum"])[0]
			default:
				out[key] = map[string]any{"string": "", "integer": child["minimum"], "number": child["minimum"],
					"boolean": false, "array": []any{}}[fmt.Sprint(child["type"])]
				if out[key] == nil && (child["type"] == "integer" || child["type"] == "number") {
					out[key] = 0
				}
			}
		}
		return out
	}
	return fill(doc, ch.Values)
}

func asList(v any) []any { l, _ := v.([]any); return l }
