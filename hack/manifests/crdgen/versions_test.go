package crdgen

import (
	"encoding/json"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/chartapi"
)

// before is the schema a kind's CRD was last generated from (its values.yaml gives no defaults,
// so nothing is nullable, nor required but what the schema requires).
const before = `{"type":"object","properties":{
  "replicas":{"type":"integer","minimum":1,"maximum":10},
  "mode":{"type":"string","enum":["a","b"]},
  "name":{"type":"string","maxLength":20},
  "timeoutSeconds":{"type":"integer"},
  "labels":{"type":"object","additionalProperties":{"type":"string"}},
  "routes":{"type":"array","items":{"type":"object","properties":{"path":{"type":"string"}}}}}}`

// generated is the CRD of a kind at version from a values schema and a kind.yaml.
func generated(t *testing.T, version, valuesSchema, kindYAML string) (*apiextv1.CustomResourceDefinition, *chartapi.Compiled) {
	t.Helper()
	k, err := chartapi.Parse([]byte(kindYAML))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.CheckVersions(version); err != nil {
		t.Fatal(err)
	}
	decl, err := chartapi.Compile(k)
	if err != nil {
		t.Fatal(err)
	}
	crd, _, err := Generate(schema.GroupVersionKind{Group: "x.example.com", Version: version, Kind: "X"}, k, Spec{Schema: []byte(valuesSchema)})
	if err != nil {
		t.Fatal(err)
	}
	return crd, decl
}

// with is before with properties set, by name, to the schemas given ("" removes one).
func with(properties ...string) string {
	var doc map[string]any
	if err := json.Unmarshal([]byte(before), &doc); err != nil {
		panic(err)
	}
	props := doc["properties"].(map[string]any)
	for i := 0; i < len(properties); i += 2 {
		if properties[i+1] == "" {
			delete(props, properties[i])
			continue
		}
		var p any
		if err := json.Unmarshal([]byte(properties[i+1]), &p); err != nil {
			panic(err)
		}
		props[properties[i]] = p
	}
	raw, _ := json.Marshal(doc)
	return string(raw)
}

// make manifests refuses every change of a kind's schema that loses or invalidates a value a
// stored resource may hold, naming the field, and passes what only adds or widens, or what
// kind.yaml declares: a new version whose fields land, or a breaking change with its reason.
func TestTheCRDChangesOnlyAsStoredResourcesAllow(t *testing.T) {
	versions := "versions:\n  - name: v2\n  - name: v1\n    changes:\n"
	cases := []struct {
		name, schema, kind string
		// version is the chart's own version (v1 unless a case declares v2).
		version string
		refused string // "" passes
	}{
		{name: "a field removed", schema: with("name", ""), refused: "v1: spec.name: v1 has no spec.name"},
		{name: "a field renamed", schema: strings.Replace(before, `"replicas"`, `"replicaCount"`, 1), refused: "spec.replicas: v1 has no spec.replicas"},
		{name: "a type changed", schema: with("timeoutSeconds", `{"type":"string"}`), refused: "spec.timeoutSeconds: type integer became string"},
		{name: "an enum narrowed", schema: with("mode", `{"type":"string","enum":["a"]}`), refused: `spec.mode: its enum no longer takes "b"`},
		{name: "an enum added", schema: with("name", `{"type":"string","maxLength":20,"enum":["x"]}`), refused: "spec.name: an enum now limits it"},
		{name: "a maximum lowered", schema: with("replicas", `{"type":"integer","minimum":1,"maximum":5}`), refused: "spec.replicas: maximum narrowed to 5"},
		{name: "a minimum raised", schema: with("replicas", `{"type":"integer","minimum":2,"maximum":10}`), refused: "spec.replicas: minimum narrowed to 2"},
		{name: "a length shortened", schema: with("name", `{"type":"string","maxLength":10}`), refused: "spec.name: maxLength narrowed to 10"},
		{name: "a pattern added", schema: with("name", `{"type":"string","maxLength":20,"pattern":"^[a-z]+$"}`), refused: `spec.name: pattern "^[a-z]+$" now checks it`},
		{name: "a field made required", schema: strings.Replace(before, `{"type":"object","properties":{`, `{"type":"object","required":["name"],"properties":{`, 1),
			refused: "spec: now requires name"},
		{name: "a rule added", schema: with("labels", `{"type":"object","additionalProperties":{"type":"string"},"x-kubernetes-validations":[{"rule":"size(self) < 3"}]}`),
			refused: "spec.labels: a new rule checks it: size(self) < 3"},
		{name: "a map's values retyped", schema: with("labels", `{"type":"object","additionalProperties":{"type":"integer"}}`), refused: "spec.labels[*]: type string became integer"},
		{name: "a list's items lose a field", schema: with("routes", `{"type":"array","items":{"type":"object","properties":{"prefix":{"type":"string"}}}}`),
			refused: "spec.routes[*].path: v1 has no spec.routes[*].path"},
		{name: "a field added, bounds and an enum widened", schema: with("mode", `{"type":"string","enum":["a","b","c"]}`, "extra", `{"type":"boolean"}`,
			"replicas", `{"type":"integer","minimum":0}`)},
		{name: "an integer widened to a number or int-or-string", schema: with("replicas", `{"type":"number"}`)},
		{name: "a breaking change accepted with its reason", schema: with("mode", `{"type":"string","enum":["a"]}`),
			kind: "versions:\n  - name: v1\n    breaking:\n      - {field: mode, why: b was never rendered}"},
		{name: "a rename declared in a new version", version: "v2", schema: strings.Replace(before, `"replicas"`, `"replicaCount"`, 1),
			kind: versions + "      - move: {from: replicas, to: replicaCount}\n"},
		{name: "a new version without its change", version: "v2", schema: strings.Replace(before, `"replicas"`, `"replicaCount"`, 1),
			kind: versions + "      - move: {from: mode, to: mode2}\n", refused: "v1 to v2: spec.replicas: v2 has no spec.replicas"},
		{name: "a removal declared", version: "v2", schema: with("name", ""),
			kind: versions + "      - remove: {field: name, why: the proxy names itself}\n"},
		{name: "a computed field that comes back", version: "v2", schema: with("timeoutSeconds", "", "timeout", `{"type":"string"}`),
			kind: versions + "      - compute: {to: timeout, from: [timeoutSeconds], expression: \"string(self.timeoutSeconds) + 's'\", " +
				"back: {timeoutSeconds: \"int(self.timeout.replace('s', ''))\"}}\n"},
		{name: "a computed field that does not come back", version: "v2", schema: with("timeoutSeconds", "", "timeout", `{"type":"string"}`),
			kind: versions + "      - compute: {to: timeout, from: [timeoutSeconds], expression: \"string(self.timeoutSeconds) + 's'\", " +
				"back: {timeoutSeconds: \"1\"}}\n", refused: "v1 to v2 and back does not give back what was stored"},
		{name: "a moved field that no longer fits", version: "v2", schema: strings.Replace(with("mode", `{"type":"string","enum":["a"]}`), `"mode"`, `"kind"`, 1),
			kind: versions + "      - move: {from: mode, to: kind}\n", refused: `v1 to v2: spec.mode: its enum no longer takes "b"`},
		{name: "a served version dropped", version: "v2", schema: before, kind: "versions:\n  - name: v2\n",
			refused: "v1: served by the CRD this one replaces, and not declared"},
	}
	prev, _ := generated(t, "v1", before, "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			version := c.version
			if version == "" {
				version = "v1"
			}
			next, decl := generated(t, version, c.schema, c.kind)
			chart := t.TempDir()
			crd, _, kept, err := Evolve(next.DeepCopy(), prev.DeepCopy(), decl, chart)
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
				t.Fatalf("err = %v, want it to say %q", err, c.refused)
			case c.refused == "" && version == "v2":
				if len(crd.Spec.Versions) != 2 || crd.Spec.Versions[1].Name != "v1" || crd.Spec.Versions[1].Storage || !crd.Spec.Versions[1].Deprecated ||
					crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextv1.WebhookConverter {
					t.Errorf("versions %+v, conversion %+v: want v2 stored, v1 served deprecated, converted by the webhook", crd.Spec.Versions, crd.Spec.Conversion)
				}
				if showJSON(crd.Spec.Versions[1].Schema) != showJSON(prev.Spec.Versions[0].Schema) {
					t.Error("v1 is not served with the schema it was served with")
				}
				// The chart keeps v1 as served: a project with no CRD yet makes the same CRD from it.
				file := chartapi.PublishedFile(chart, "v1")
				if _, ok := kept[file]; !ok {
					t.Fatalf("the chart is to keep %v, want %s", kept, file)
				}
				_, fresh := generated(t, version, c.schema, c.kind)
				if err := yaml.Unmarshal(kept[file], &fresh.Kind.Versions[1].Published); err != nil {
					t.Fatal(err)
				}
				again, _, more, err := Evolve(next.DeepCopy(), nil, fresh, chart)
				if err != nil || len(more) != 0 || showJSON(again) != showJSON(crd) {
					t.Errorf("from the chart alone: %v, files %v, same CRD: %v", err, more, showJSON(again) == showJSON(crd))
				}
			}
		})
	}
}
