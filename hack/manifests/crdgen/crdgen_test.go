package crdgen

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/example/myproxy-operator/internal/chartapi"
)

const valuesSchemaPath = "helm-charts/myproxy/values.schema.json"

// inRepo runs f from the repository root, where `make manifests` runs the generator.
func inRepo(t *testing.T) {
	t.Helper()
	t.Chdir(filepath.Join("..", "..", ".."))
}

func TestChartSchemaIsStructural(t *testing.T) {
	inRepo(t)
	raw, err := os.ReadFile(valuesSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := SpecSchema(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(spec, &internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatalf("not structural: %v", err)
	}
	if errs := structuralschema.ValidateStructural(field.NewPath("spec"), s); len(errs) > 0 {
		t.Fatalf("not structural: %v", errs.ToAggregate())
	}
	if spec.Properties["routes"].Description == "" {
		t.Error("descriptions must be carried over (kubectl explain uses them)")
	}
}

func TestConversion(t *testing.T) {
	cases := []struct {
		name   string
		schema string
		keep   []string
		// defaults are the chart's default values (values.yaml).
		defaults map[string]any
		want     string // JSON of the converted spec schema
		errHas   string
	}{
		{name: "defaults are dropped but for the kept paths",
			schema: `{"type":"object","properties":{"replicas":{"type":"integer","default":1},"image":{"type":"string","default":"nginx"}}}`,
			keep:   []string{"spec.replicas"},
			want:   `{"type":"object","properties":{"image":{"type":"string"},"replicas":{"type":"integer","default":1}},"x-kubernetes-preserve-unknown-fields":true}`, errHas: ""},
		{name: "a kept path without a default is refused",
			schema: `{"type":"object","properties":{"replicas":{"type":"integer"}}}`, keep: []string{"spec.replicas"}, want: "", errHas: "spec.replicas: needs a default"},
		{name: "drops JSON Schema bookkeeping and additionalProperties false, which closes the object; a title describes",
			schema: `{"$schema":"x","$id":"y","$comment":"z","title":"T","type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}`, keep: nil,
			want: `{"description":"T","type":"object","properties":{"a":{"type":"string"}}}`, errHas: ""},
		{name: "propertyNames becomes a CEL rule over the keys, after the rules already there",
			schema: `{"type":"object","properties":{"h":{"type":"object","x-kubernetes-validations":[{"rule":"size(self) < 3"}],"propertyNames":{"pattern":"^[a-z\"]+$","maxLength":8},"additionalProperties":{"type":"string"}}}}`,
			want: `{"type":"object","properties":{"h":{"type":"object","additionalProperties":{"type":"string"},"x-kubernetes-validations":[{"rule":"size(self) < 3"},` +
				`{"rule":"self.all(k, size(k) <= 8 \u0026\u0026 k.matches(\"^[a-z\\\"]+$\"))","message":"h: every key must be at most 8 characters, matching ^[a-z\"]+$"}]}},"x-kubernetes-preserve-unknown-fields":true}`},
		{name: "propertyNames beyond pattern and lengths is refused",
			schema: `{"type":"object","properties":{"h":{"type":"object","propertyNames":{"enum":["a"]}}}}`, errHas: "spec.h: propertyNames.enum: only pattern"},
		{name: "string or integer becomes int-or-string",
			schema: `{"type":"object","properties":{"q":{"type":["string","integer"]}}}`, keep: nil,
			want: `{"type":"object","properties":{"q":{"x-kubernetes-int-or-string":true}},"x-kubernetes-preserve-unknown-fields":true}`, errHas: ""},
		{name: "number or string takes any value, and checks the string and the number",
			schema: `{"type":"object","properties":{"q":{"type":["integer","number","string"],"pattern":"^[0-9]+m$","minimum":0,"minItems":1}}}`,
			want:   `{"type":"object","properties":{"q":{"minimum":0,"pattern":"^[0-9]+m$","x-kubernetes-preserve-unknown-fields":true}},"x-kubernetes-preserve-unknown-fields":true}`},
		{name: "free-form object keeps unknown fields",
			schema: `{"type":"object","properties":{"affinity":{"type":"object"},"tol":{"type":"array","items":{"type":"object"}}}}`, keep: nil,
			want: `{"type":"object","properties":{"affinity":{"type":"object","x-kubernetes-preserve-unknown-fields":true},` +
				`"tol":{"type":"array","items":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},"x-kubernetes-preserve-unknown-fields":true}`, errHas: ""},
		{name: "map values are converted",
			schema: `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":["integer","string"]}}}}`, keep: nil,
			want: `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"x-kubernetes-int-or-string":true}}},"x-kubernetes-preserve-unknown-fields":true}`, errHas: ""},
		{name: "CEL rules pass through",
			schema: `{"type":"array","x-kubernetes-validations":[{"rule":"size(self) < 3","message":"m"}]}`, keep: nil,
			want: `{"type":"array","items":{"x-kubernetes-preserve-unknown-fields":true},"x-kubernetes-validations":[{"rule":"size(self) < 3","message":"m"}]}`, errHas: ""},
		{name: "other type unions keep any value",
			schema: `{"type":"object","properties":{"x":{"type":["string","boolean"],"minLength":2}}}`, keep: nil,
			want: `{"type":"object","properties":{"x":{"x-kubernetes-preserve-unknown-fields":true}},"x-kubernetes-preserve-unknown-fields":true}`},
		{name: "a reference outside the document is refused, naming it",
			schema: `{"type":"object","properties":{"a":{"$ref":"https://example.com/common.json#/image"}}}`, errHas: `spec.a: $ref "https://example.com/common.json#/image": only references within`},
		{name: "a reference to nothing is refused",
			schema: `{"type":"object","properties":{"a":{"$ref":"#/definitions/none"}}}`, errHas: `spec.a: $ref "#/definitions/none": no such schema`},
		{name: "invalid JSON is refused", schema: `{`, keep: nil, want: "", errHas: "not valid JSON"},
		{name: "an object the schema describes in part stays open, its described keys typed",
			schema: `{"type":"object","additionalProperties":false,"properties":{"reloader":{"type":"object","properties":{"watchMode":{"enum":["a","b"]}}}}}`,
			want: `{"type":"object","properties":{"reloader":{"type":"object","properties":{"watchMode":{"type":"string","enum":["a","b"]}},` +
				`"x-kubernetes-preserve-unknown-fields":true}}}`},
		{name: "unevaluatedProperties false closes an object as additionalProperties false does",
			schema: `{"type":"object","unevaluatedProperties":false,"properties":{"a":{"type":"string"}}}`,
			want:   `{"type":"object","properties":{"a":{"type":"string"}}}`},
		{name: "patternProperties beside additionalProperties false keep the object open",
			schema: `{"type":"object","additionalProperties":false,"patternProperties":{"^x-":{"type":"string"}},"properties":{"a":{"type":"string"}}}`,
			want:   `{"type":"object","properties":{"a":{"type":"string"}},"x-kubernetes-preserve-unknown-fields":true}`},
		{name: "a required key values.yaml gives no default stays required; one it gives goes",
			schema:   `{"type":"object","additionalProperties":false,"required":["replicas","policy"],"properties":{"replicas":{"type":"integer"},"policy":{"type":"string","default":"audit"}}}`,
			defaults: map[string]any{"replicas": 1},
			want:     `{"type":"object","properties":{"policy":{"type":"string"},"replicas":{"type":"integer"}},"required":["policy"]}`},
		{name: "a null default is none: Helm removes the key",
			schema:   `{"type":"object","additionalProperties":false,"required":["a"],"properties":{"a":{"type":"string"}}}`,
			defaults: map[string]any{"a": nil},
			want:     `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`},
		{name: "an object values.yaml gives is required while it requires a key without a default",
			schema: `{"type":"object","additionalProperties":false,"properties":{` +
				`"auth":{"type":"object","additionalProperties":false,"required":["user","policy"],"properties":{"user":{"type":"string"},"policy":{"type":"string"}}},` +
				`"tls":{"type":"object","additionalProperties":false,"required":["cert"],"properties":{"cert":{"type":"string"}}}}}`,
			defaults: map[string]any{"auth": map[string]any{"user": "admin"}},
			want: `{"type":"object","properties":{"auth":{"type":"object","nullable":true,"properties":{"policy":{"type":"string"},"user":{"type":"string"}},"required":["policy"]},` +
				`"tls":{"type":"object","properties":{"cert":{"type":"string"}},"required":["cert"]}},"required":["auth"]}`},
		{name: "the keys of list items and map values keep their required: values.yaml gives them no defaults",
			schema:   `{"type":"object","additionalProperties":false,"properties":{"routes":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["path"],"properties":{"path":{"type":"string"}}}}}}`,
			defaults: map[string]any{"routes": []any{map[string]any{"path": "/"}}},
			want:     `{"type":"object","properties":{"routes":{"type":"array","nullable":true,"items":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}}`},
		{name: "a key values.yaml gives takes null, which deletes the default; not one the schema requires, nor one without a default",
			schema: `{"type":"object","additionalProperties":false,"required":["req"],"properties":{"a":{"type":"string"},"none":{"type":"string"},` +
				`"req":{"type":"string"},"m":{"type":"object","additionalProperties":{"type":"string"}},"empty":{"type":"object","additionalProperties":{"type":"string"}},` +
				`"o":{"type":"object","properties":{"p":{"type":"integer"}}}}}`,
			defaults: map[string]any{"a": "x", "req": "r", "m": map[string]any{"k": "v"}, "empty": map[string]any{}, "o": map[string]any{"p": 1}},
			want: `{"type":"object","properties":{"a":{"type":"string","nullable":true},"empty":{"type":"object","nullable":true,"additionalProperties":{"type":"string"}},` +
				`"m":{"type":"object","nullable":true,"additionalProperties":{"type":"string","nullable":true}},"none":{"type":"string"},` +
				`"o":{"type":"object","nullable":true,"properties":{"p":{"type":"integer","nullable":true}},"x-kubernetes-preserve-unknown-fields":true},"req":{"type":"string"}}}`},
		{name: "the enum of a key that takes null becomes a rule, which the apiserver does not run on null; one that cannot be one keeps the key from null",
			schema: `{"type":"object","properties":{"mode":{"enum":["a","b"]},"tag":{"type":["string","null"],"enum":["1",null]},` +
				`"port":{"type":"integer","enum":[80,443]},"ratio":{"type":"number","enum":[0.5]}}}`,
			defaults: map[string]any{"mode": "a", "port": 80, "ratio": 0.5},
			want: `{"type":"object","properties":{"mode":{"type":"string","nullable":true,"x-kubernetes-validations":[{"rule":"self in ['a', 'b']","message":"must be one of \"a\", \"b\", or null"}]},` +
				`"port":{"type":"integer","nullable":true,"x-kubernetes-validations":[{"rule":"self in [80, 443]","message":"must be one of 80, 443, or null"}]},` +
				`"ratio":{"type":"number","enum":[0.5]},` +
				`"tag":{"type":"string","nullable":true,"x-kubernetes-validations":[{"rule":"self in ['1']","message":"must be one of \"1\", or null"}]}},"x-kubernetes-preserve-unknown-fields":true}`},
		{name: "a required key whose default the CRD keeps (the scale subresource's) goes",
			schema: `{"type":"object","additionalProperties":false,"required":["replicas"],"properties":{"replicas":{"type":"integer","default":1}}}`,
			keep:   []string{"spec.replicas"},
			want:   `{"type":"object","properties":{"replicas":{"type":"integer","default":1}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := SpecSchema([]byte(c.schema), c.defaults, c.keep...)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("error %v, want one containing %q", err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want apiextv1.JSONSchemaProps
			if err := json.Unmarshal([]byte(c.want), &want); err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(want)
			if !bytes.Equal(gotJSON, wantJSON) {
				t.Errorf("got  %s\nwant %s", gotJSON, wantJSON)
			}
			if c.keep != nil || got.Type != "object" {
				return // the apiserver's judgement needs a spec object and no scale subresource
			}
			if _, _, err := Generate(schema.GroupVersionKind{Group: "x.example.com", Version: "v1", Kind: "X"}, &chartapi.Kind{},
				Spec{Schema: []byte(c.schema), Defaults: c.defaults}); err != nil {
				t.Errorf("the apiserver refuses the CRD: %v", err)
			}
		})
	}
}

func TestPlural(t *testing.T) {
	for singular, want := range map[string]string{"myproxy": "myproxies", "staticsite": "staticsites", "cache": "caches",
		"gateway": "gateways", "box": "boxes", "mesh": "meshes", "status": "statuses"} {
		if got := Plural(singular); got != want {
			t.Errorf("Plural(%q) = %q, want %q", singular, got, want)
		}
	}
}
