// Package crdgen generates the CustomResourceDefinition of a watches.yaml entry from its chart
// alone: the `spec` schema is the chart's values.schema.json, and the names, rules, printer
// columns, status schema and scale subresource come from the chart's kind.yaml (internal/chartapi).
// The chart stays the single source of truth for the API, and the apiserver rejects bad input
// at `kubectl apply`.
//
// JSON Schema and Kubernetes' structural schemas differ; the conversion:
//   - keywords Kubernetes does not know ($schema, $id, $comment) are dropped;
//   - `additionalProperties: false` is dropped: structural schemas forbid it, and unknown fields
//     are rejected anyway by kubectl's strict field validation (and pruned otherwise);
//   - `type: [string, integer]` becomes `x-kubernetes-int-or-string` (resource quantities);
//   - an object with neither properties nor additionalProperties (affinity, tolerations...)
//     keeps unknown fields (`x-kubernetes-preserve-unknown-fields`);
//   - `x-kubernetes-validations` (CEL rules) pass through: JSON Schema validators such as Helm's
//     ignore unknown keywords, so chart authors write them in values.schema.json;
//   - `propertyNames` (the keys of a map) becomes a CEL rule on the map: structural schemas
//     cannot constrain keys, and a key is a value a tenant chooses like any other;
//   - `default` is dropped: the apiserver would store it in every MyProxy at creation, and a
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

var droppedKeywords = []string{"$schema", "$id", "$comment", "title"}

// SpecSchema converts a values.schema.json document into a structural schema for `spec`.
// keepDefaults lists the paths (like "spec.replicas") whose `default` is kept.
func SpecSchema(valuesSchema []byte, keepDefaults ...string) (*apiextv1.JSONSchemaProps, error) {
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
	converted, err := convert(doc, "spec", keep)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(converted)
	if err != nil {
		return nil, err
	}
	var props apiextv1.JSONSchemaProps
	if err := json.Unmarshal(raw, &props); err != nil {
		return nil, fmt.Errorf("converted schema does not fit a CRD schema: %w", err)
	}
	return &props, nil
}

// convert rewrites one schema node (and its children) from JSON Schema into CRD form.
func convert(node map[string]any, path string, keepDefault map[string]bool) (map[string]any, error) {
	out := map[string]any{}
	for k, v := range node {
		out[k] = v
	}
	for _, k := range droppedKeywords {
		delete(out, k)
	}
	if !keepDefault[path] {
		delete(out, "default")
	}
	if ap, ok := out["additionalProperties"].(bool); ok {
		if ap && out["properties"] == nil {
			out["x-kubernetes-preserve-unknown-fields"] = true
		}
		delete(out, "additionalProperties")
	}
	if names, ok := out["propertyNames"]; ok {
		rule, err := propertyNamesRule(names, path)
		if err != nil {
			return nil, err
		}
		rules, _ := out["x-kubernetes-validations"].([]any)
		out["x-kubernetes-validations"] = append(append([]any{}, rules...), rule)
		delete(out, "propertyNames")
	}
	if types, ok := out["type"].([]any); ok {
		if !isIntOrString(types) {
			return nil, fmt.Errorf("%s: type %v: a CRD schema allows one type, or [string, integer]", path, types)
		}
		delete(out, "type")
		out["x-kubernetes-int-or-string"] = true
	}
	if props, ok := out["properties"].(map[string]any); ok {
		convertedProps := map[string]any{}
		for _, name := range sortedKeys(props) {
			child, ok := props[name].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s.%s: schema must be an object", path, name)
			}
			c, err := convert(child, path+"."+name, keepDefault)
			if err != nil {
				return nil, err
			}
			convertedProps[name] = c
		}
		out["properties"] = convertedProps
	}
	for _, key := range []string{"items", "additionalProperties"} {
		if child, ok := out[key].(map[string]any); ok {
			c, err := convert(child, path+"[]", keepDefault)
			if err != nil {
				return nil, err
			}
			out[key] = c
		}
	}
	if out["type"] == "object" && out["properties"] == nil && out["additionalProperties"] == nil {
		out["x-kubernetes-preserve-unknown-fields"] = true
	}
	return out, nil
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

func isIntOrString(types []any) bool {
	if len(types) != 2 {
		return false
	}
	seen := map[any]bool{types[0]: true, types[1]: true}
	return seen["string"] && seen["integer"]
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
