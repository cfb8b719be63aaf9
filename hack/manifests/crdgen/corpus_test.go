package crdgen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/myproxy-operator/internal/chartapi"
)

// at reads a dotted path (map keys, list indexes) of a converted schema; nil when absent.
func at(doc any, path string) any {
	for _, key := range strings.Split(path, ".") {
		switch node := doc.(type) {
		case map[string]any:
			doc = node[key]
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i >= len(node) {
				return nil
			}
			doc = node[i]
		default:
			return nil
		}
	}
	return doc
}

// The corpus holds what real values.schema.json files use and a CRD schema cannot: each
// becomes a CRD that the apiserver's own validation accepts, and keeps what it can check.
func TestRealWorldSchemasBecomeValidCRDs(t *testing.T) {
	p := "properties."
	want := map[string]map[string]any{
		"ref-definitions.json": {
			p + "image.description":                       "The container image.",
			p + "image.properties.pullPolicy.enum":        []any{"Always", "IfNotPresent", "Never"},
			p + "sidecar.properties.image.properties.tag": map[string]any{"type": "string"},
			p + "sidecar.properties.port.maximum":         65535.0,
		},
		"defs-2020.json": {
			p + "nameOverride":                              map[string]any{"type": "string", "nullable": true},
			p + "tree.properties.name.type":                 "string",
			p + "tree.properties.children.items":            map[string]any{"x-kubernetes-preserve-unknown-fields": true},
			p + "replicas":                                  map[string]any{"type": "integer", "minimum": 0.0, "exclusiveMinimum": true},
			p + "mode":                                      map[string]any{"type": "string", "enum": []any{"proxy"}},
			p + "contact":                                   map[string]any{"type": "string"},
			p + "site.format":                               "uri",
			"x-kubernetes-preserve-unknown-fields":          true, // JSON Schema leaves it open
			p + "tree.x-kubernetes-preserve-unknown-fields": true,
		},
		"junctors.json": {
			p + "resources.type":                                     "object",
			p + "resources.required":                                 []any{"requests"},
			p + "resources.properties.limits.additionalProperties":   map[string]any{"x-kubernetes-int-or-string": true},
			p + "resources.properties.requests.additionalProperties": map[string]any{"x-kubernetes-int-or-string": true},
			p + "storage.properties.size.type":                       "string",
			p + "storage.properties.medium":                          map[string]any{"type": "string"}, // its enum holds in one alternative only
			p + "storage.properties.type.type":                       "string",
			p + "storage.required":                                   nil,
			p + "timeout":                                            map[string]any{"x-kubernetes-int-or-string": true},
			p + "weight":                                             map[string]any{"type": "number"},
			p + "port":                                               map[string]any{"type": "integer"},
			p + "storage.properties.type.x-kubernetes-preserve-unknown-fields":     nil,
			p + "resources.properties.limits.x-kubernetes-preserve-unknown-fields": nil,
		},
		"maps.json": {
			p + "podLabels.additionalProperties.type":           "string",
			p + "extraEnv.properties.LOG_LEVEL.type":            "string",
			p + "extraEnv.x-kubernetes-preserve-unknown-fields": true,
			p + "extraEnv.additionalProperties":                 nil,
			p + "annotations.additionalProperties.type":         "string",
			p + "annotations.x-kubernetes-validations.0.rule":   `self.all(k, k.matches("^[a-z0-9./-]+$"))`,
			p + "config.x-kubernetes-preserve-unknown-fields":   true,
			p + "anything":                     map[string]any{"x-kubernetes-preserve-unknown-fields": true},
			p + "hosts.x-kubernetes-list-type": "set",
			p + "pair.items":                   map[string]any{"x-kubernetes-preserve-unknown-fields": true},
			p + "untyped":                      map[string]any{"description": "no type at all", "x-kubernetes-preserve-unknown-fields": true},
			p + "inferred.type":                "object",
			"additionalProperties":             nil,
		},
		"recursive-allof.json": {
			p + "metrics.properties.enabled.type": "boolean",
			p + "metrics.properties.port.type":    "integer",
			p + "chain.properties.next":           map[string]any{"x-kubernetes-preserve-unknown-fields": true},
		},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "schemas", "*.json"))
	if err != nil || len(files) != len(want) {
		t.Fatalf("corpus %v (%v): every file needs its expectations", files, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			spec := validSpec(t, schema.GroupVersionKind{Group: "corpus.example.com", Version: "v1", Kind: "Corpus"}, raw)
			for path, w := range want[filepath.Base(file)] {
				if got := at(spec, path); !reflect.DeepEqual(got, w) {
					t.Errorf("%s = %s, want %s", path, show(got), show(w))
				}
			}
		})
	}
}

// validSpec generates the CRD of a values schema, which the apiserver's validation accepts, and
// returns its spec schema as a map for at.
func validSpec(t *testing.T, gvk schema.GroupVersionKind, valuesSchema []byte) map[string]any {
	t.Helper()
	crd, _, err := Generate(gvk, &chartapi.Kind{}, Spec{Schema: valuesSchema})
	if err != nil {
		t.Fatal(err)
	}
	return specOf(t, crd)
}

// specOf is the spec schema of a CRD the apiserver's validation accepts, as a map for at.
func specOf(t *testing.T, crd *apiextv1.CustomResourceDefinition) map[string]any {
	t.Helper()
	if err := Validate(crd); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"])
	var spec map[string]any
	if err := json.Unmarshal(js, &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

func show(v any) string { b, _ := json.Marshal(v); return string(b) }

// Validate is the apiserver's judgement, not a formality: what the conversion exists to avoid
// is refused by it.
func TestValidateRefusesWhatTheApiserverRefuses(t *testing.T) {
	crd, _, err := Generate(schema.GroupVersionKind{Group: "corpus.example.com", Version: "v1", Kind: "Corpus"}, &chartapi.Kind{},
		Spec{Schema: []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	a := spec.Properties["a"]
	a.Type = "" // not structural: a node without a type
	spec.Properties["a"] = a
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	if err := Validate(crd); err == nil || !strings.Contains(err.Error(), "properties[spec].properties[a].type: Required value") {
		t.Errorf("Validate = %v, want the apiserver's refusal of an untyped node", err)
	}
}
