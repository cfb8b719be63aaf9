package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/releaseutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/hack/manifests/chartrender"
	"github.com/example/myproxy-operator/hack/manifests/crdgen"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/test/harness"
)

// A custom resource's spec is what its users write in a values file: a number where
// values.yaml has one written as a string (a quantity, a port, a version), and null to delete a
// default. The corpus charts served for their CRDs (testdata/corpus/watches.yaml) carry such
// specs; what the apiserver stores, the value translation returns and Helm renders of them is
// compared with Helm's own handling of the same values file.

// asUsersWriteThem are specs of the corpus charts served for their CRDs, as their users write
// them (YAML, as in a values file).
var asUsersWriteThem = []struct {
	kind string
	spec string
}{
	{kind: "Quantities", spec: `
image:
  tag: 2.16.1
resources:
  operator:
    limits:
      cpu: 500m
  metricServer:
    limits:
      cpu: "1"
      memory: null
service:
  port: "9023"
`},
	{kind: "Receivers", spec: `
config:
  receivers:
    jaeger: null
  exporters:
    debug: null
    otlphttp:
      endpoint: http://traces.example.com:4318
  service:
    pipelines:
      traces:
        receivers: [otlp, zipkin]
        exporters: [otlphttp]
`},
	{kind: "FixedNames", spec: `
server:
  port: "8081"
configs:
  cm:
    url: null
  secret:
    extra:
      admin.password: s3cret
`},
}

// servedForTheirCRDs are the kinds of asUsersWriteThem: make manifests writes their CRDs with
// the corpus's, and no test here installs a release of them.
func servedForTheirCRDs() []string {
	var kinds []string
	for _, s := range asUsersWriteThem {
		kinds = append(kinds, s.kind)
	}
	return kinds
}

// specOf decodes a spec of asUsersWriteThem.
func specOf(t *testing.T, kind string) map[string]any {
	t.Helper()
	for _, s := range asUsersWriteThem {
		if s.kind == kind {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(s.spec), &spec); err != nil {
				t.Fatal(err)
			}
			return spec
		}
	}
	t.Fatalf("no spec of %s", kind)
	return nil
}

// canonical is v as JSON, numbers of any Go type written alike, keys sorted.
func canonical(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

// applied writes a custom resource of kind holding spec as a manifest and applies it with kubectl
// and these flags, then returns it as the apiserver stores it.
func applied(t *testing.T, c client.Client, ns, kind, name string, spec map[string]any, flags ...string) *unstructured.Unstructured {
	t.Helper()
	u := corpusCR(kind, ns, name)
	u.Object["spec"] = spec
	manifest, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	path := harness.WriteTemp(t, "cr-*.yaml", manifest)
	if out, err := kubectl(t, append([]string{"apply", "-f", path}, flags...)...); err != nil {
		t.Fatalf("kubectl apply %s: %v\n%s", strings.Join(flags, " "), err, out)
	}
	stored := corpusCR(kind, ns, name)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(stored), stored); err != nil {
		t.Fatal(err)
	}
	return stored
}

// translated is the values the operator's value translation returns for a custom resource of
// a corpus chart.
func translated(t *testing.T, chartDir string, cr *unstructured.Unstructured) map[string]any {
	t.Helper()
	k, err := chartapi.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	// No check of these charts reads a Secret or records an Event (as in the preview).
	vals, err := chartapi.Translator{Recorder: &record.FakeRecorder{}, Checks: k.Checks}.Translate(context.Background(), cr)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// rendered renders a chart with values once, as Helm's install does (its coalescing of
// values.yaml, its schema check, its template engine), by object.
func rendered(t *testing.T, chartDir string, vals map[string]any) map[string]map[string]any {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chartrender.RenderValues(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	return byObject(objs)
}

// helmTemplate renders a chart with `helm template -f` a values file holding vals, as the
// offline renderings' release (chartrender's), by object.
func helmTemplate(t *testing.T, chartDir string, vals map[string]any) map[string]map[string]any {
	t.Helper()
	raw, err := yaml.Marshal(vals)
	if err != nil {
		t.Fatal(err)
	}
	values := harness.WriteTemp(t, "values-*.yaml", raw)
	out := harness.Run(t, nil, harness.Tool(t, "HELM", "helm"), "template", "example", chartDir,
		"--namespace", chartrender.SampleNamespace, "-f", values)
	var objs []map[string]any
	for _, doc := range releaseutil.SplitManifests(out) {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if obj == nil {
			continue
		}
		if md, ok := obj["metadata"].(map[string]any); ok && md["namespace"] == nil {
			md["namespace"] = chartrender.SampleNamespace
		}
		objs = append(objs, obj)
	}
	return byObject(objs)
}

func byObject(objs []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		out[fmt.Sprintf("%v %v", o["kind"], md["name"])] = o
	}
	return out
}

// The corpus CRDs take a number where values.yaml has one written as a string, as users write
// quantities, ports and versions, and refuse a string that is none of those; the release renders
// them, and the apiserver takes the objects it renders.
func TestNumbersWrittenAsStringsAreTakenAndRendered(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	watches, _ := corpusProject(t, c)
	chartDir := filepath.Join(filepath.Dir(watches), "quantities")
	ns := newNamespace(t, c, nil)
	stored := applied(t, c, ns, "Quantities", "strings", specOf(t, "Quantities"), "--server-side")
	for path, want := range map[string]string{"resources.operator.limits.cpu": "500m", "resources.metricServer.limits.cpu": "1",
		"service.port": "9023", "image.tag": "2.16.1"} {
		if got, _, _ := unstructured.NestedString(stored.Object, append([]string{"spec"}, strings.Split(path, ".")...)...); got != want {
			t.Errorf("spec.%s stored as %q, want the string %q", path, got, want)
		}
	}

	objs := rendered(t, chartDir, translated(t, chartDir, stored))
	for _, key := range slices.Sorted(maps.Keys(objs)) {
		u := &unstructured.Unstructured{Object: objs[key]}
		u.SetNamespace(ns)
		if err := c.Create(ctx, u, client.DryRunAll); err != nil {
			t.Errorf("%s, rendered from the strings: refused by the apiserver: %v", key, err)
		}
	}
	container := func(deployment string) map[string]any {
		containers, _, _ := unstructured.NestedSlice(objs["Deployment example-quantities-"+deployment], "spec", "template", "spec", "containers")
		if len(containers) != 1 {
			t.Fatalf("Deployment example-quantities-%s: containers %v", deployment, containers)
		}
		return containers[0].(map[string]any)
	}
	for what, got := range map[string]any{
		"500m":                                   mustNested(t, container("operator"), "resources", "limits", "cpu"),
		"1":                                      mustNested(t, container("metric-server"), "resources", "limits", "cpu"),
		"registry.example.com/autoscaler:2.16.1": container("operator")["image"],
		"9023":                                   mustNested(t, objs["Service example-quantities-metrics"], "spec", "ports", "0", "port"),
	} {
		if fmt.Sprint(got) != what {
			t.Errorf("rendered %v, want %s", got, what)
		}
	}

	r := newCorpusResources(t, ns)
	for value, refused := range map[any]string{
		"1 CPU":         `spec.resources.operator.limits.cpu: Invalid value: "1 CPU": spec.resources.operator.limits.cpu in body should match '` + crdgen.NumberAsString + `'`,
		"1\n---\nkind:": "spec.resources.operator.limits.cpu in body should match",
		0.5:             `spec.resources.operator.limits.cpu: Invalid value: "number": spec.resources.operator.limits.cpu in body must be of type integer,string`,
		true:            "spec.resources.operator.limits.cpu in body must be of type integer,string",
	} {
		_, err := r.create(crdgen.Plural("quantities"), "Quantities", "refused", map[string]any{"resources": map[string]any{"operator": map[string]any{
			"limits": map[string]any{"cpu": value}}}}, true, metav1.FieldValidationStrict)
		if err == nil || !strings.Contains(err.Error(), refused) {
			t.Errorf("cpu %#v: %v, want refused: %s", value, err, refused)
		}
	}
}

// mustNested reads a dotted path (map keys, list indexes) of an object.
func mustNested(t *testing.T, obj map[string]any, path ...string) any {
	t.Helper()
	var v any = obj
	for _, k := range path {
		switch node := v.(type) {
		case map[string]any:
			v = node[k]
		case []any:
			var i int
			if _, err := fmt.Sscan(k, &i); err != nil || i >= len(node) {
				t.Fatalf("%v: no item %s", path, k)
			}
			v = node[i]
		default:
			t.Fatalf("%v: nothing at %s", path, k)
		}
	}
	return v
}

// null in a custom resource's spec deletes that key from the chart's defaults, as it does in a
// values file: kubectl apply --server-side stores the nulls (where values.yaml gives a default,
// and in the objects a schema leaves open, a chart's own schema or an inferred one), the value
// translation hands them on, and Helm's coalescing and rendering of them once, as its install
// does, renders what `helm template -f` renders of the same values file, which is not what the
// defaults render. A client-side kubectl apply sends no null: kubectl removes them first.
func TestNullDeletesADefaultAsInAValuesFile(t *testing.T) {
	c := harness.NewClient(t, cfg)
	watches, _ := corpusProject(t, c)
	ns := newNamespace(t, c, nil)
	for _, kind := range servedForTheirCRDs() {
		t.Run(kind, func(t *testing.T) {
			chartDir := filepath.Join(filepath.Dir(watches), strings.ToLower(kind))
			spec := specOf(t, kind)
			stored := applied(t, c, ns, kind, "nulls", spec, "--server-side")
			if got, want := canonical(stored.Object["spec"]), canonical(spec); got != want {
				t.Fatalf("stored spec\n  %s\nwant the applied one\n  %s", got, want)
			}
			vals := translated(t, chartDir, stored)
			if got, want := canonical(vals), canonical(spec); got != want {
				t.Fatalf("translated values\n  %s\nwant the spec\n  %s", got, want)
			}
			ours, helms := rendered(t, chartDir, vals), helmTemplate(t, chartDir, spec)
			if d := diff(essences(ours), essences(helms), "the custom resource", "helm template -f"); len(d) > 0 {
				t.Errorf("the renderings differ:\n%s", strings.Join(d, "\n"))
			}
			if d := diff(essences(ours), essences(rendered(t, chartDir, map[string]any{})), "the custom resource", "the defaults"); len(d) == 0 {
				t.Error("the custom resource renders what the defaults render: its nulls deleted nothing")
			}

			clientSide := applied(t, c, ns, kind, "client-side", spec)
			if strings.Contains(canonical(clientSide.Object["spec"]), "null") {
				t.Errorf("kubectl apply without --server-side stored nulls: %s", canonical(clientSide.Object["spec"]))
			}
		})
	}
	// What the nulls deleted, said plainly.
	receivers := rendered(t, filepath.Join(filepath.Dir(watches), "receivers"), specOf(t, "Receivers"))
	ports := canonical(mustNested(t, receivers["Service example-receivers"], "spec", "ports"))
	if strings.Contains(ports, "jaeger") || !strings.Contains(ports, "otlp-grpc") {
		t.Errorf("the Service's ports %s: want the jaeger receiver's gone, the others' kept", ports)
	}
	quantities := rendered(t, filepath.Join(filepath.Dir(watches), "quantities"), specOf(t, "Quantities"))
	if limits := canonical(mustNested(t, quantities["Deployment example-quantities-metric-server"],
		"spec", "template", "spec", "containers", "0", "resources", "limits")); limits != `{"cpu":"1"}` {
		t.Errorf("the metric server's limits %s, want its memory limit deleted", limits)
	}
}

// essences are rendered objects as JSON, by object.
func essences(objs map[string]map[string]any) map[string]string {
	out := map[string]string{}
	for k, o := range objs {
		out[k] = canonical(o)
	}
	return out
}
