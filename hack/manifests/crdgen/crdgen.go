// Package crdgen generates the CustomResourceDefinition of a watches.yaml entry from its chart
// alone: the `spec` schema comes from the chart's values.schema.json (or, for a chart without
// one, is inferred from values.yaml: InferSchema), and the names, rules, printer columns,
// status schema and scale subresource come from the chart's kind.yaml (internal/chartapi).
// The chart stays the single source of truth for the API, and the apiserver rejects bad input
// at `kubectl apply`. Validate runs the apiserver's own CRD validation on the result.
//
// JSON Schema and Kubernetes' structural schemas differ; the conversion (structural.go) keeps
// every check a CRD can hold and loosens the rest, which Helm still checks against the whole
// values.schema.json at every install and upgrade:
//   - local `$ref`s (definitions, $defs, any JSON pointer) are expanded, a recursive one into an
//     open node; a remote one is refused, naming it; `allOf` members are merged;
//   - `oneOf`/`anyOf` give the node every property and type of their alternatives, but not the
//     checks that hold within one alternative (a CRD would refuse what another admits); `not` goes;
//   - a type list becomes one type: null makes it nullable, [string, integer] is
//     `x-kubernetes-int-or-string`, [integer, number] a number, [number, string] any value whose
//     checks of a string or a number (pattern, lengths, bounds) stay, any other list any value;
//   - an object with properties keeps unknown fields (x-kubernetes-preserve-unknown-fields)
//     beside its typed properties, unless the schema closes it with `additionalProperties: false`
//     (or `unevaluatedProperties: false`) and no patternProperties: JSON Schema admits the keys
//     it does not describe, and the CRD must refuse nothing Helm admits. A closed object refuses
//     unknown keys (kubectl's strict field validation; pruned otherwise), and `additionalProperties:
//     false` itself is dropped (structural schemas forbid it); one pattern with no other key
//     becomes a map with a CEL rule on its keys, several keep unknown fields;
//   - `required` keeps only the keys values.yaml gives no default (nor the CRD, for the scale
//     subresource's path): Helm coalesces values.yaml in before it validates, so the others are
//     never missing. An object values.yaml gives is required in turn when it still requires a
//     key. When spec still requires a key, a resource without a spec is refused by a rule that
//     names the key, and spec gets no `{}` default;
//   - an object with neither properties nor additionalProperties (affinity, tolerations...)
//     keeps unknown fields, and a node without a type (nor a way to infer one) takes any value;
//   - `const` becomes a one-value enum, a numeric exclusiveMinimum/Maximum (draft 6+) the
//     OpenAPI pair, `uniqueItems` on scalars a set list, a title a description; formats the
//     apiserver does not check and keywords it does not know are dropped;
//   - `x-kubernetes-validations` (CEL rules) pass through: JSON Schema validators such as Helm's
//     ignore unknown keywords, so chart authors write them in values.schema.json;
//   - `propertyNames` (the keys of a map) becomes a CEL rule on the map: structural schemas
//     cannot constrain keys, and a key is a value a tenant chooses like any other;
//   - a CEL rule the conversion writes (an enum that lets null pass, a key pattern, propertyNames)
//     that the apiserver's cost estimate refuses, alone or with the CRD's other rules, is written
//     another way: an OpenAPI enum where null means no value, else left to Helm (budget.go);
//   - `default` is dropped: the apiserver would store it in every resource at creation, and a
//     later change of the chart's default would never reach existing releases. values.yaml
//     supplies defaults at render time instead. The one exception is the field the scale
//     subresource reads (specReplicasPath), which must be stored for `kubectl scale` and HPAs.
package crdgen

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// SpecSchema converts a values.schema.json document into a structural schema for `spec`.
// defaults are the chart's default values (values.yaml): a key the schema requires and they
// give is not required of a resource. keepDefaults lists the paths (like "spec.replicas")
// whose `default` is kept.
func SpecSchema(valuesSchema []byte, defaults map[string]any, keepDefaults ...string) (*apiextv1.JSONSchemaProps, error) {
	tree, err := specTree(valuesSchema, defaults, keepDefaults...)
	if err != nil {
		return nil, err
	}
	return schemaProps(tree)
}

// specTree is SpecSchema's conversion as a document, with the generator's marks (budget.go).
func specTree(valuesSchema []byte, defaults map[string]any, keepDefaults ...string) (map[string]any, error) {
	var doc map[string]any
	if err := json.Unmarshal(valuesSchema, &doc); err != nil {
		return nil, fmt.Errorf("values.schema.json is not valid JSON: %w", err)
	}
	keep := map[string]bool{}
	for _, p := range keepDefaults {
		keep[p] = true
	}
	for p := range keep {
		if !hasDefault(doc, strings.Split(p, ".")[1:]) {
			return nil, fmt.Errorf("%s: needs a default in values.schema.json (the scale subresource reads it)", p)
		}
	}
	if doc["type"] == nil {
		doc["type"] = "object"
	}
	if defaults == nil {
		defaults = map[string]any{}
	}
	return (&structuralizer{root: doc, keep: keep, defaults: defaults}).node(doc, "spec", []string{}, nil)
}

// schemaProps is a converted schema document, without the generator's marks, as a CRD holds it.
func schemaProps(tree map[string]any) (*apiextv1.JSONSchemaProps, error) {
	raw, err := json.Marshal(unmarked(tree))
	if err != nil {
		return nil, err
	}
	var props apiextv1.JSONSchemaProps
	if err := json.Unmarshal(raw, &props); err != nil {
		return nil, fmt.Errorf("converted schema does not fit a CRD schema: %w", err)
	}
	return &props, nil
}

// propertyNamesRule turns a map's propertyNames schema (pattern, minLength, maxLength) into a
// CEL rule over the map's keys. The length checks come first, so a long key is refused before
// the pattern runs over it.
func propertyNamesRule(node any, path string) (map[string]any, error) {
	names, ok := node.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: propertyNames must be a schema object", path)
	}
	var checks, says []string
	for _, k := range sortedKeys(names) {
		switch v := names[k].(type) {
		case float64:
			switch k {
			case "maxLength":
				checks = append(checks, fmt.Sprintf("size(k) <= %d", int64(v)))
				says = append(says, fmt.Sprintf("at most %d characters", int64(v)))
			case "minLength":
				checks = append([]string{fmt.Sprintf("size(k) >= %d", int64(v))}, checks...)
				says = append(says, fmt.Sprintf("at least %d characters", int64(v)))
			default:
				return nil, fmt.Errorf("%s: propertyNames.%s: only pattern, minLength and maxLength can be checked in a CRD", path, k)
			}
		case string:
			if k != "pattern" {
				return nil, fmt.Errorf("%s: propertyNames.%s: only pattern, minLength and maxLength can be checked in a CRD", path, k)
			}
		default:
			return nil, fmt.Errorf("%s: propertyNames.%s: only pattern, minLength and maxLength can be checked in a CRD", path, k)
		}
	}
	if pattern, ok := names["pattern"].(string); ok {
		checks = append(checks, "k.matches("+strconv.Quote(pattern)+")")
		says = append(says, "matching "+pattern)
	}
	if len(checks) == 0 {
		return nil, fmt.Errorf("%s: propertyNames has nothing a CRD can check (pattern, minLength, maxLength)", path)
	}
	return map[string]any{
		"rule":    "self.all(k, " + strings.Join(checks, " && ") + ")",
		"message": fmt.Sprintf("%s: every key must be %s", strings.TrimPrefix(path, "spec."), strings.Join(says, ", ")),
		markOwn:   &ownRule{path: path, check: "its propertyNames"},
	}, nil
}

// hasDefault reports whether the property at the path (below the root) declares a default.
func hasDefault(node map[string]any, path []string) bool {
	for _, name := range path {
		props, _ := node["properties"].(map[string]any)
		child, ok := props[name].(map[string]any)
		if !ok {
			return false
		}
		node = child
	}
	_, ok := node["default"]
	return ok
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
