package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releasei "helm.sh/helm/v4/pkg/release"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/hack/manifests/chartrender"
	"github.com/example/myproxy-operator/hack/manifests/crdgen"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/test/harness"
)

// A custom resource's spec is what its users write in a values file: a string where values.yaml
// has a number (a quantity, a port, a version), null to delete a default, a list in place of the
// default list. The corpus charts served for their CRDs (testdata/corpus/watches.yaml) carry such
// specs. The apiserver stores them as written, the value translation hands them on, and the
// operator installs what `helm template -f` renders of a values file holding exactly the spec,
// with Helm 4, the Helm the operator renders with (bin/helm4).

// asUsersWriteThem are custom resources of the corpus charts served for their CRDs, each spec as
// its users write it in a values file (YAML). name is the custom resource's, and its release's.
var asUsersWriteThem = []struct {
	name, kind string
	spec       string
	// installs is what the spec makes of the release's objects, said plainly: by "kind name" and
	// a dotted path (map keys, list indexes; a dot in a key written `\.`), the value there as JSON;
	// "absent" where nothing is.
	installs map[[2]string]string
}{
	// Strings where values.yaml has numbers (quantities, a port, a version); null deleting a
	// scalar default (a memory limit) and a map default (the operator's requests).
	{name: "quantities", kind: "Quantities", spec: `
image:
  tag: 2.16.1
resources:
  operator:
    limits:
      cpu: 500m
    requests: null
  metricServer:
    limits:
      cpu: "1"
      memory: null
service:
  port: "9023"
`, installs: map[[2]string]string{
		{"Deployment quantities-quantities-operator", "spec.template.spec.containers.0.resources"}:      `{"limits":{"cpu":"500m","memory":"1000Mi"}}`,
		{"Deployment quantities-quantities-metric-server", "spec.template.spec.containers.0.resources"}: `{"limits":{"cpu":"1"},"requests":{"cpu":"100m","memory":"100Mi"}}`,
		{"Deployment quantities-quantities-operator", "spec.template.spec.containers.0.image"}:          `"registry.example.com/autoscaler:2.16.1"`,
		{"Service quantities-quantities-metrics", "spec.ports.0.port"}:                                  `9023`,
	}},
	// null deleting entries of default maps (a receiver, an exporter); lists replacing the
	// default lists (a pipeline's receivers and exporters).
	{name: "receivers", kind: "Receivers", spec: `
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
`, installs: map[[2]string]string{
		{"Service receivers-receivers", "spec.ports"}: `[{"name":"otlp-grpc","port":4317,"targetPort":"otlp-grpc"},` +
			`{"name":"otlp-http","port":4318,"targetPort":"otlp-http"},{"name":"zipkin-http","port":9411,"targetPort":"zipkin-http"}]`,
	}},
	// Nulls at several depths: a default two levels inside a receiver that stays, a receiver, and
	// a key values.yaml does not give (Helm keeps that null: there is no default to delete).
	{name: "nested-nulls", kind: "Receivers", spec: `
config:
  receivers:
    otlp:
      protocols:
        http: null
    zipkin: null
  exporters:
    debug:
      verbosity: null
  service:
    pipelines:
      traces:
        receivers: [otlp, jaeger]
`, installs: map[[2]string]string{
		{"Service nested-nulls-receivers", "spec.ports"}: `[{"name":"jaeger-grpc","port":14250,"targetPort":"jaeger-grpc"},` +
			`{"name":"jaeger-thrift-h","port":14268,"targetPort":"jaeger-thrift-h"},{"name":"otlp-grpc","port":4317,"targetPort":"otlp-grpc"}]`,
		{"ConfigMap nested-nulls-receivers", `data.config\.yaml`}: canonical(`exporters:
  debug:
    verbosity: null
receivers:
  jaeger:
    protocols:
      grpc:
        endpoint: 0.0.0.0:14250
      thrift_http:
        endpoint: 0.0.0.0:14268
  otlp:
    protocols:
      grpc:
        endpoint: 0.0.0.0:4317
service:
  pipelines:
    traces:
      exporters:
      - debug
      receivers:
      - otlp
      - jaeger
`),
	}},
	// A port written as a string; null deleting a scalar default the chart ranges over.
	{name: "fixednames", kind: "FixedNames", spec: `
server:
  port: "8081"
configs:
  cm:
    url: null
  secret:
    extra:
      admin.password: s3cret
`, installs: map[[2]string]string{
		{"Deployment cd-server", "spec.template.spec.containers.0.ports.0.containerPort"}: `8081`,
		{"ConfigMap cd-cm", "data"}: "null",
	}},
}

// servedForTheirCRDs are the kinds of asUsersWriteThem: make manifests writes their CRDs with
// the corpus's.
func servedForTheirCRDs() []string {
	var kinds []string
	for _, s := range asUsersWriteThem {
		if !slices.Contains(kinds, s.kind) {
			kinds = append(kinds, s.kind)
		}
	}
	return kinds
}

// specOf decodes the spec of the custom resource of asUsersWriteThem called name.
func specOf(t *testing.T, name string) map[string]any {
	t.Helper()
	for _, s := range asUsersWriteThem {
		if s.name == name {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(s.spec), &spec); err != nil {
				t.Fatal(err)
			}
			return spec
		}
	}
	t.Fatalf("no spec called %s", name)
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

// rendered renders a chart with values once, as Helm 4's install does (its coalescing of
// values.yaml, its schema check, its template engine), as the release "example" of
// chartrender.SampleNamespace, by object.
func rendered(t *testing.T, chartDir string, vals map[string]any) map[string]map[string]any {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := util.ToRenderValuesWithSchemaValidation(ch, vals, common.ReleaseOptions{Name: "example",
		Namespace: chartrender.SampleNamespace, Revision: 1, IsInstall: true}, common.DefaultCapabilities, false)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasPrefix(path.Base(name), "_") || !slices.Contains([]string{".yaml", ".yml", ".json"}, path.Ext(name)) {
			continue // helpers and NOTES.txt
		}
		objs = append(objs, manifestObjects(t, files[name], chartrender.SampleNamespace)...)
	}
	return byObject(objs)
}

// manifestObjects parses the YAML documents of a manifest, each object without a namespace put
// in namespace: the operator's manifests, as helm template's, hold what the templates write, no
// namespace in these charts, and every kind they render is namespaced.
func manifestObjects(t *testing.T, manifest, namespace string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, doc := range releaseutil.SplitManifests(manifest) {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if obj == nil {
			continue
		}
		if md, ok := obj["metadata"].(map[string]any); ok && md["namespace"] == nil {
			md["namespace"] = namespace
		}
		objs = append(objs, obj)
	}
	return objs
}

// helmTemplate is what `helm template` of Helm 4 (bin/helm4) renders of a chart as release
// name of namespace, for a Kubernetes of version kubeVersion, with these further arguments
// (-f values.yaml), by object.
func helmTemplate(t *testing.T, chartDir, name, namespace, kubeVersion string, args ...string) map[string]map[string]any {
	t.Helper()
	helm := harness.Tool(t, "HELM4", "helm4")
	args = append([]string{"template", name, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}, args...)
	cmd := exec.Command(helm, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm4 %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("helm4 %s says:\n%s", strings.Join(args, " "), stderr.String())
	}
	return byObject(manifestObjects(t, stdout.String(), namespace))
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
// quantities, ports and versions, and refuse a string that is none of those; Helm 4 renders
// them, and the apiserver takes the objects it renders.
func TestNumbersWrittenAsStringsAreTakenAndRendered(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	watches, _ := corpusProject(t, c)
	chartDir := filepath.Join(filepath.Dir(watches), "quantities")
	ns := newNamespace(t, c, nil)
	stored := applied(t, c, ns, "Quantities", "strings", specOf(t, "quantities"), "--server-side")
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
	v, ok := nested(obj, path...)
	if !ok {
		t.Fatalf("%v: nothing there", path)
	}
	return v
}

// nested reads a path (map keys, list indexes) of an object; false when nothing is there.
func nested(obj map[string]any, path ...string) (any, bool) {
	var v any = obj
	for _, k := range path {
		switch node := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = node[k]; !ok {
				return nil, false
			}
		case []any:
			var i int
			if _, err := fmt.Sscan(k, &i); err != nil || i < 0 || i >= len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// dotted splits a dotted path; a key holding a dot writes it `\.`.
func dotted(p string) []string {
	parts := strings.Split(strings.ReplaceAll(p, `\.`, "\x00"), ".")
	for i := range parts {
		parts[i] = strings.ReplaceAll(parts[i], "\x00", ".")
	}
	return parts
}

// The operator installs what `helm template -f` of Helm 4 renders of a values file holding
// exactly a custom resource's spec, for every spec of asUsersWriteThem: a string where
// values.yaml has a number renders as the string does, null deletes the default as it does in a
// values file, a list replaces the default list. Each custom resource is applied with kubectl
// apply --server-side (which stores the nulls; the stored spec and the translated values are the
// spec as written) in a namespace of its own, under one operator running with the manager role
// make manifests generates. The comparison is of objects, parsed from the release's manifest
// and from helm template's output (each in the release's namespace: manifestObjects), less only
// what the operator adds to every release object (operatorAdds); the release's objects in the
// cluster hold every field helm template renders.
// A client-side kubectl apply sends no null: kubectl removes them first.
func TestTheOperatorInstallsWhatHelmTemplateRendersOfTheSpecAsAValuesFile(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	watches, managerRole := corpusProject(t, c)
	version, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	// The charts render as for the cluster they are installed in, as the operator renders them
	// (.Capabilities.KubeVersion is the apiserver's).
	kubeVersion := version.GitVersion
	spaces := map[string]string{} // by custom resource: FixedNames' objects are named after the chart
	for _, s := range asUsersWriteThem {
		spaces[s.name] = newNamespace(t, c, nil)
	}
	asManager := harness.ServiceAccountKubeconfig(t, c, cfg, spaces[asUsersWriteThem[0].name], operatorAccount, managerRole)
	harness.StartOperator(t, operatorBin, asManager, []string{"--watches-file=" + watches},
		"WATCH_NAMESPACE="+strings.Join(slices.Sorted(maps.Values(spaces)), ","))
	unwatched := newNamespace(t, c, nil)
	clientset := kubernetes.NewForConfigOrDie(cfg)

	for _, s := range asUsersWriteThem {
		t.Run(s.name, func(t *testing.T) {
			ns := spaces[s.name]
			chartDir := filepath.Join(filepath.Dir(watches), strings.ToLower(s.kind))
			spec := specOf(t, s.name)
			stored := applied(t, c, ns, s.kind, s.name, spec, "--server-side")
			if got, want := canonical(stored.Object["spec"]), canonical(spec); got != want {
				t.Fatalf("stored spec\n  %s\nwant the applied one\n  %s", got, want)
			}
			if got, want := canonical(translated(t, chartDir, stored)), canonical(spec); got != want {
				t.Fatalf("translated values\n  %s\nwant the spec\n  %s", got, want)
			}
			harness.Eventually(t, timeout, s.name+" deployed", func(ctx context.Context) (bool, string) {
				u := corpusCR(s.kind, ns, s.name)
				if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
					return false, err.Error()
				}
				status, reason, msg := harness.Condition(u, names.ConditionDeployed)
				failed, _, why := harness.Condition(u, names.ConditionReleaseFailed)
				return status == "True", fmt.Sprintf("Deployed %s %s %s; ReleaseFailed %s %s", status, reason, msg, failed, why)
			})
			rel, err := storage.Init(driver.NewSecrets(clientset.CoreV1().Secrets(ns))).Deployed(s.name)
			if err != nil {
				t.Fatal(err)
			}
			acc, err := releasei.NewAccessor(rel)
			if err != nil {
				t.Fatal(err)
			}
			installed := byObject(manifestObjects(t, acc.Manifest(), ns))

			valuesFile := harness.WriteTemp(t, "values-*.yaml", []byte(s.spec))
			want := helmTemplate(t, chartDir, s.name, ns, kubeVersion, "-f", valuesFile)
			if d := diff(essences(installed), essences(want), "the operator's release", "helm template -f"); len(d) > 0 {
				t.Errorf("the operator's release is not what helm template -f renders of the spec:\n%s", strings.Join(d, "\n"))
			}
			if d := diff(essences(want), essences(helmTemplate(t, chartDir, s.name, ns, kubeVersion)), "the values file", "the defaults"); len(d) == 0 {
				t.Error("helm template -f renders what the defaults render: the spec tests nothing")
			}
			for key, obj := range want {
				live := &unstructured.Unstructured{Object: map[string]any{"apiVersion": obj["apiVersion"], "kind": obj["kind"]}}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprint(obj["metadata"].(map[string]any)["name"])}, live); err != nil {
					t.Errorf("%s: %v", key, err)
					continue
				}
				if where := notWithin(asStored(obj), live.Object, nil); where != "" {
					t.Errorf("%s in the cluster is not what helm template -f renders: %s", key, where)
				}
				if err := operatorAdds(live.DeepCopy().Object, stored); err != nil {
					t.Errorf("%s in the cluster: %v", key, err)
				}
			}
			for at, want := range s.installs {
				got := "absent"
				if v, ok := nested(installed[at[0]], dotted(at[1])...); ok {
					got = canonical(v)
				}
				if got != want {
					t.Errorf("%s %s: %s, want %s", at[0], at[1], got, want)
				}
			}

			clientSide := applied(t, c, unwatched, s.kind, s.name, spec)
			if strings.Contains(canonical(clientSide.Object["spec"]), "null") {
				t.Errorf("kubectl apply without --server-side stored nulls: %s", canonical(clientSide.Object["spec"]))
			}
		})
	}
}

// operatorAdds checks that an object of the operator's release, as the cluster holds it, carries
// what the operator adds to every release object by design, and helm template does not
// (docs/chart-authoring.md, "What the operator adds to every release"); the release's stored
// manifest holds none of it, only what the chart rendered (compared with helm template above):
//   - the label names.ManagedLabel, names.ManagedValue for an operator that is not sharded: the
//     operator's kube client (package helmconfig) sets it on every object it builds, and the
//     operator's caches select release objects by it;
//   - metadata.ownerReferences, one controller reference to the custom resource: the kube
//     client adds it too, for the garbage collector to delete the objects with the custom
//     resource. (An object that cannot carry one gets operator-sdk's owner annotations instead;
//     these charts render none: every object is in the custom resource's namespace.)
func operatorAdds(obj map[string]any, cr *unstructured.Unstructured) error {
	u := &unstructured.Unstructured{Object: obj}
	labels := u.GetLabels()
	if labels[names.ManagedLabel] != names.ManagedValue {
		return fmt.Errorf("label %s=%q, want %q", names.ManagedLabel, labels[names.ManagedLabel], names.ManagedValue)
	}
	delete(labels, names.ManagedLabel)
	u.SetLabels(labels)
	owners := u.GetOwnerReferences()
	want := []metav1.OwnerReference{*metav1.NewControllerRef(cr, cr.GroupVersionKind())}
	if !reflect.DeepEqual(owners, want) {
		return fmt.Errorf("owner references %+v, want %+v", owners, want)
	}
	u.SetOwnerReferences(nil)
	return nil
}

// asStored is a rendered object as the apiserver stores it, where that is another field: a
// Secret's stringData is written into its data, base64-encoded, and never read back.
func asStored(obj map[string]any) map[string]any {
	if obj["kind"] != "Secret" || obj["stringData"] == nil {
		return obj
	}
	out := maps.Clone(obj)
	data, _ := out["data"].(map[string]any)
	data = maps.Clone(data)
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range out["stringData"].(map[string]any) {
		data[k] = base64.StdEncoding.EncodeToString([]byte(fmt.Sprint(v)))
	}
	out["data"] = data
	delete(out, "stringData")
	return out
}

// notWithin says where want has a field that got lacks or holds otherwise ("" when got holds
// all of want): a list must be as long as want's, and each item hold want's item; a null in want
// is a field got may lack (the apiserver stores no null field). got may hold more, as the objects
// in the cluster do: what the apiserver fills in (uid, defaults, status), Helm's ownership
// metadata and what the operator adds (operatorAdds).
func notWithin(want, got any, at []string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: %s, want an object", strings.Join(at, "."), canonical(got))
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if _, ok := g[k]; !ok && w[k] != nil {
				return fmt.Sprintf("%s: absent, want %s", strings.Join(append(at, k), "."), canonical(w[k]))
			}
			if where := notWithin(w[k], g[k], append(at, k)); where != "" {
				return where
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: %s, want %s", strings.Join(at, "."), canonical(got), canonical(want))
		}
		for i := range w {
			if where := notWithin(w[i], g[i], append(at, fmt.Sprint(i))); where != "" {
				return where
			}
		}
		return ""
	default:
		if canonical(want) != canonical(got) {
			return fmt.Sprintf("%s: %s, want %s", strings.Join(at, "."), canonical(got), canonical(want))
		}
		return ""
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
