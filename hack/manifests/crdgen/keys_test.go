package crdgen

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/chartapi"
)

func dotted(paths [][]string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, strings.Join(p, "."))
	}
	return out
}

// Commented-out YAML is placed where it would be once uncommented: at the top level, under
// the real key above it, or nowhere when it is inside a list item; readme-generator's @param
// lines name whole paths; sentences that start like a key are not keys.
func TestCommentedKeysArePlacedAsUncommented(t *testing.T) {
	values := `# -- Annotations of the Pods.
# podAnnotations: {}
# Ref: https://kubernetes.io/docs/
replicaCount: 1
controller:
  resources:
    requests:
      cpu: 100m
    ## limits:
    ##   cpu: 500m
  # -- An extra key of controller.
  # extraArgs: []
volumes: []
# - name: foo
#   secret:
#     secretName: mysecret
hosts:
  - host: a
    # port: 80
rules:
  - matches: []
  #   filters:
  #   - type: X
## @param service.nodePorts.http Node port for HTTP
# Note: whatever follows is prose.
#nameOverride: ""
`
	got := dotted(CommentedKeys([]byte(values)))
	slices.Sort(got)
	want := []string{"controller.extraArgs", "controller.resources.limits", "controller.resources.limits.cpu", "nameOverride",
		"podAnnotations", "service.nodePorts.http"}
	if !slices.Equal(got, want) {
		t.Errorf("commented keys %q, want %q", got, want)
	}
}

func testChartOf(t *testing.T, values string, templates map[string]string, deps ...*chart.Chart) *chart.Chart {
	t.Helper()
	var vals map[string]any
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		t.Fatal(err)
	}
	if vals == nil {
		vals = map[string]any{}
	}
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "c", Version: "0.1.0"}, Values: vals,
		Raw: []*chart.File{{Name: "values.yaml", Data: []byte(values)}}}
	for _, name := range slices.Sorted(maps.Keys(templates)) {
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/" + name, Data: []byte(templates[name])})
	}
	for _, d := range deps {
		ch.AddDependency(d)
	}
	return ch
}

// The analysis follows the values through what templates do with them: fields, variables,
// with and range, index, get and dig, dicts handed to named templates, computed template names;
// and what a template hands away whole counts as read whole.
func TestWhatTemplatesReadIsFollowed(t *testing.T) {
	helpers := `{{- define "c.fullname" -}}
{{- if .Values.fullnameOverride }}{{ .Values.fullnameOverride }}{{ else }}{{ default .Chart.Name .Values.nameOverride }}{{ end }}
{{- end }}
{{- define "c.image" -}}{{ .image.repository }}:{{ .image.tag | default .context.Chart.AppVersion }}{{ .context.Values.global.registry }}{{- end }}
{{- define "c.render" -}}{{ tpl (toYaml .value) .context }}{{- end }}
{{- define "c.labels" -}}{{ with .Values.labels }}{{ .team }}{{ end }}{{- end }}
`
	ch := testChartOf(t, "image:\n  repository: r\n  tag: t\ntplValue: '{{ .Values.fromTpl }}'\n", map[string]string{
		"_helpers.tpl": helpers,
		"a.yaml": `name: {{ include "c.fullname" . }}
image: {{ include "c.image" (dict "image" .Values.image "context" $) }}
{{- $svc := .Values.service }}
port: {{ $svc.port }}
{{- with .Values.probe }}{{ .path }}{{ end }}
{{- range .Values.hosts }}{{ .name }}{{ end }}
{{- index .Values "app.ini" "server" | toYaml }}
{{- get .Values.pdb "minAvailable" }}{{ dig "a" "b" "" .Values.deep }}
{{- include "c.render" (dict "value" .Values.extra "context" $) }}
{{- include (printf "%s.labels" .Chart.Name) . }}
{{- if hasKey .Values.flags "enabled" }}{{ end }}
{{- .Values.sub.level }}`,
	}, testChartOf(t, "level: 1\n", map[string]string{"s.yaml": "{{ .Values.level }}{{ .Values.global.x }}{{ toYaml .Values.resources }}"}))
	ch.Dependencies()[0].Metadata.Name = "sub"
	reads, err := AnalyseReads(ch)
	if err != nil {
		t.Fatal(err)
	}
	read := dotted(reads.Read)
	for _, want := range []string{"fullnameOverride", "nameOverride", "image.repository", "image.tag", "global.registry", "service.port",
		"probe.path", "app.ini.server", "pdb.minAvailable", "deep.a.b", "labels.team", "flags.enabled", "sub.level", "global.x",
		"fromTpl"} {
		if !slices.Contains(read, want) {
			t.Errorf("%s is not read; read: %q", want, read)
		}
	}
	whole := dotted(reads.Whole)
	for _, want := range []string{"hosts", "app.ini.server", "extra", "sub.resources"} {
		if !slices.Contains(whole, want) {
			t.Errorf("%s is not read whole; whole: %q", want, whole)
		}
	}
	if !strings.HasPrefix(reads.TplOfValues, "templates/_helpers.tpl:5:") {
		t.Errorf("TplOfValues %q, want where c.render renders a value with tpl", reads.TplOfValues)
	}
	for _, not := range []string{"", "image", "service", "sub"} {
		if slices.Contains(whole, not) {
			t.Errorf("%q is read whole; whole: %q", not, whole)
		}
	}
}

// A template that hands the values away whole (toYaml .Values), or the top-level object to a
// function the analysis does not follow, reads every key: nothing is checked, and why is said.
func TestValuesHandedAwayWholeCheckNothing(t *testing.T) {
	for name, tmpl := range map[string]string{
		"toYaml":       "{{ toYaml .Values }}",
		"a variable":   "{{ $v := .Values }}{{ $v | toJson }}",
		"computed key": `{{ range $k := list "a" "b" }}{{ index $.Values (printf "%s-x" $k) }}{{ end }}`,
		"root away":    "{{ $x := merge (dict) . }}{{ toYaml $x }}",
	} {
		ch := testChartOf(t, "a: 1\n", map[string]string{"a.yaml": tmpl})
		reads, err := AnalyseReads(ch)
		if err != nil {
			t.Fatal(err)
		}
		checks, why := KnownKeys(ch, reads, nil).Checks()
		if len(checks) != 0 || !strings.Contains(why, "templates/a.yaml:1") {
			t.Errorf("%s: checks %v (%s), want none, and why naming the template", name, checks, why)
		}
	}
}

// The checked objects: spec and every object with known keys, but those with free keys, those
// templates read whole, and those the CRD closes; known keys come from values.yaml, its
// comments, the schema, the templates, the subcharts and global.
func TestChecksSkipFreeWholeAndClosedObjects(t *testing.T) {
	values := `image:
  repository: r
podAnnotations: {}
resources:
  requests:
    cpu: 1
  # limits: {}
strict:
  a: 1
`
	sub := testChartOf(t, "port: 1\n", map[string]string{"s.yaml": "{{ .Values.port }}"})
	sub.Metadata.Name = "backend"
	ch := testChartOf(t, values, map[string]string{"a.yaml": "{{ .Values.image.repository }}{{ .Values.nameOverride }}{{ toYaml .Values.podAnnotations }}" +
		"{{ .Values.resources.requests.cpu }}{{ toYaml .Values.affinity }}"}, sub)
	spec, err := SpecSchema([]byte(`{"type":"object","properties":{"image":{"type":"object","properties":{"repository":{"type":"string"}}},`+
		`"podAnnotations":{"type":"object"},"resources":{"type":"object","properties":{"requests":{"type":"object","properties":{"cpu":{"type":"integer"}}}}},`+
		`"strict":{"type":"object","additionalProperties":false,"properties":{"a":{"type":"integer"}}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	reads, err := AnalyseReads(ch)
	if err != nil {
		t.Fatal(err)
	}
	checks, why := KnownKeys(ch, reads, spec).Checks()
	got := map[string][]string{}
	for _, c := range checks {
		got[strings.Join(c.Path, ".")] = c.Known
	}
	want := map[string][]string{
		"":          {"affinity", "backend", "global", "image", "nameOverride", "podAnnotations", "resources", "strict"},
		"image":     {"repository"},
		"resources": {"limits", "requests"},
		// Only cpu is read of requests: a key beside it is warned of.
		"resources.requests": {"cpu"},
		"backend":            {"port"},
	}
	if len(got) != len(want) || why != "" {
		t.Errorf("checks %v (%s), want %v", got, why, want)
	}
	for path, keys := range want {
		if !slices.Equal(got[path], keys) {
			t.Errorf("%q known %q, want %q", path, got[path], keys)
		}
	}
}

// The policy warns (never denies) on create and on updates that change the spec, with one
// validation per checked object that names the unread keys.
func TestWarningPolicyWarnsOnly(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "demo.example.com", Version: "v1", Kind: "Demo"}
	raw, err := WarningPolicy(gvk, "demos", "demo", []KeyCheck{{Known: []string{"image", "app.ini"}}, {Path: []string{"app.ini"}, Known: []string{"it's"}}}, false, "charts/demo")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) != 2 || !strings.HasPrefix(docs[0], "# Generated by `make manifests` from charts/demo.") {
		t.Fatalf("not a policy and a binding under a header:\n%s", raw)
	}
	var policy admissionv1.ValidatingAdmissionPolicy
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &policy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &binding); err != nil {
		t.Fatal(err)
	}
	if binding.Spec.PolicyName != policy.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Warn}) {
		t.Errorf("binding %+v: want Warn only, of %s", binding.Spec, policy.Name)
	}
	if r := policy.Spec.MatchConstraints.ResourceRules[0]; !slices.Equal(r.Resources, []string{"demos"}) || !slices.Equal(r.APIGroups, []string{gvk.Group}) {
		t.Errorf("the policy matches %+v", r)
	}
	if len(policy.Spec.Validations) != 2 || len(policy.Spec.Variables) != 2 {
		t.Fatalf("validations %v, variables %v: want one each per checked object", policy.Spec.Validations, policy.Spec.Variables)
	}
	for _, want := range []string{`object.spec['app.ini'].filter(k, !(k in ['it\'s']))`, `'app.ini' in object.spec && type(object.spec['app.ini']) == map`} {
		if !strings.Contains(policy.Spec.Variables[1].Expression, want) {
			t.Errorf("variable %s lacks %s", policy.Spec.Variables[1].Expression, want)
		}
	}
	if !strings.Contains(policy.Spec.Validations[1].MessageExpression, "'spec.app.ini.'") ||
		!strings.Contains(policy.Spec.Validations[0].MessageExpression, "no template of chart demo reads this key (a typo?)") {
		t.Errorf("messages %v do not name the path and the chart", policy.Spec.Validations)
	}
}

// What make manifests says of a spec schema: the typed keys, open, closed and free objects, and
// the required keys, compactly.
func TestSpecLayout(t *testing.T) {
	defaults, _ := chartutil.ReadValues([]byte("image: {repository: r}\n"))
	crd, _, err := Generate(schema.GroupVersionKind{Group: "x.example.com", Version: "v1", Kind: "X"}, &chartapi.Kind{}, Spec{Defaults: defaults, Schema: []byte(`{
		"type":"object","additionalProperties":false,"required":["policy","image"],
		"properties":{"policy":{"type":"string"},"image":{"type":"object","required":["repository"],"properties":{"repository":{"type":"string"},"tag":{"type":"string"}}},
		"hosts":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}}}},"labels":{"type":"object","additionalProperties":{"type":"string"}},` +
		`"weight":{"type":["number","string"],"pattern":"^[0-9.]+$"},"anything":{"type":["number","boolean"]}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(crd); err != nil {
		t.Fatal(err)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	if !slices.ContainsFunc(root.XValidations, func(r apiextv1.ValidationRule) bool {
		return r.Rule == "has(self.spec)" && strings.Contains(r.Message, "the chart requires spec.policy,")
	}) {
		t.Errorf("no rule refuses a resource without the spec the chart requires: %v", root.XValidations)
	}
	spec := root.Properties["spec"]
	l := SpecLayout(&spec)
	for what, got := range map[string]string{
		"typed: hosts, hosts[].name, image.{repository,tag}, policy, weight": "typed: " + Compact(l.Typed),
		"open: hosts[], image":     "open: " + Compact(l.Open),
		"closed: ":                 "closed: " + Compact(l.Closed),
		"free: anything, labels":   "free: " + Compact(l.Free),
		"required: policy":         "required: " + Compact(l.Required),
		"no default for the spec:": "no default for the spec:" + string(specDefault(crd)),
	} {
		if got != what {
			t.Errorf("%s, want %s", got, what)
		}
	}
}

func specDefault(crd *apiextv1.CustomResourceDefinition) []byte {
	if d := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Default; d != nil {
		return d.Raw
	}
	return nil
}

// A named template that calls itself with ever new arguments ends the analysis, reading them
// whole, rather than running it without end.
func TestRecursiveTemplatesEnd(t *testing.T) {
	ch := testChartOf(t, "tree: {}\n", map[string]string{
		"_t.tpl": `{{ define "walk" }}{{ include "walk" .a }}{{ include "walk" .b }}{{ end }}`,
		"a.yaml": `{{ include "walk" .Values.tree }}`,
	})
	reads, err := AnalyseReads(ch)
	if err != nil {
		t.Fatal(err)
	}
	if whole := dotted(reads.Whole); len(whole) == 0 || !strings.HasPrefix(whole[0], "tree.") {
		t.Errorf("whole %q: want a path below tree read whole where the analysis stopped", whole)
	}
}
