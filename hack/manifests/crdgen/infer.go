package crdgen

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// InferSchema writes a values.schema.json for a chart that has none, from its values.yaml: each
// key gets the type of its default, nested maps and lists are followed, and the comment above
// a key becomes its description (so `kubectl explain` documents the spec as the chart's
// values.yaml does). A default that says nothing of its type (an empty map or list, null, an
// empty string) keeps its subtree open: the chart accepts anything there.
//
// Every object is open (x-kubernetes-preserve-unknown-fields) beside the keys values.yaml sets:
// values.yaml is a sample, not a contract. Charts read keys it only mentions in comments
// (`# podAnnotations: {}`) or not at all (nameOverride, a ResourceRequirements' limits, the
// free keys of an ini-style map), and Helm accepts any of them; a closed object would refuse
// them at kubectl apply. What inference checks is the type of each key values.yaml sets. A
// number is also taken as a string (NumberAsString): users write quantities, ports and versions
// both ways (`cpu: 1`, `cpu: "1"`, `cpu: 500m`). Each of those keys is nullable, as in Helm,
// where null removes a default. A key no template reads is told of by a warning (see
// WarningPolicy), never refused. The defaults are kept in the schema (SpecSchema drops them but
// where the scale subresource needs one).
func InferSchema(valuesYAML []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	root := map[string]any{"type": "object"}
	if len(doc.Content) > 0 && doc.Content[0].Kind == yaml.MappingNode {
		root = inferNode(doc.Content[0])
	}
	return json.Marshal(root)
}

func inferNode(n *yaml.Node) map[string]any {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content) == 0 {
			return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
		}
		props := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			if key.Value == "<<" { // a YAML merge key: its map's keys are this map's
				for k, v := range inferNode(value)["properties"].(map[string]any) {
					props[k] = v
				}
				continue
			}
			child := inferNode(value)
			if d := description(key.HeadComment); d != "" {
				child["description"] = d
			}
			if child["type"] != nil {
				child["nullable"] = true
			}
			props[key.Value] = child
		}
		return map[string]any{"type": "object", "properties": props, "x-kubernetes-preserve-unknown-fields": true}
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			return map[string]any{"type": "array", "items": map[string]any{"x-kubernetes-preserve-unknown-fields": true}}
		}
		items := inferNode(n.Content[0])
		for _, more := range n.Content[1:] {
			items = merge(items, inferNode(more))
		}
		return map[string]any{"type": "array", "items": items}
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil || v == nil || v == "" {
			// null, and the empty string charts write for "unset" (tag: "", servicePort: ""),
			// say nothing of the type a user gives: any value.
			return map[string]any{"x-kubernetes-preserve-unknown-fields": true}
		}
		switch x := v.(type) {
		case bool:
			return map[string]any{"type": "boolean", "default": x}
		case int:
			return map[string]any{"type": []any{"integer", "string"}, "pattern": NumberAsString, "default": x}
		case float64:
			return map[string]any{"type": []any{"number", "string"}, "pattern": NumberAsString, "default": x}
		default:
			return map[string]any{"type": "string", "default": n.Value}
		}
	}
	return map[string]any{"x-kubernetes-preserve-unknown-fields": true}
}

// NumberAsString is the pattern of the strings an inferred schema takes where values.yaml's
// default is a number: a number written as a string, starting with a digit (after a sign, a
// "v" or a "."), as a quantity (500m, 1.5Gi, 1e3), a version (2.20.2, v1.2.3-rc.1+b5) or a
// percentage (25%) is; a word ("two") is still refused as the default's type would. Templates
// print such a key bare (`port: {{ .Values.port }}`: a quoted number is not a number), so the
// string is written into the manifest as YAML: the pattern refuses what YAML would read as
// structure (line breaks, spaces, quotes, ":", "#", braces and brackets, an indicator such as
// "*", "&", "!", "|" or "%" at the start), so that a tenant's string there renders one scalar.
const NumberAsString = `^[-+]?v?\.?[0-9][0-9A-Za-z._+%-]*$`

// helmDocsMarker starts a description in the helm-docs convention ("# -- The image tag.").
var helmDocsMarker = regexp.MustCompile(`^--\s*(\([^)]*\)\s*)?`)

// description turns the comment block above a key into prose: the comment markers are
// removed, helm-docs' "-- (type)" prefix too, and the last paragraph is kept (a blank comment
// line or an unrelated block above it is not about this key).
func description(comment string) string {
	var lines []string
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#"))
		if line == "" {
			lines = lines[:0]
			continue
		}
		if strings.HasPrefix(line, "@") { // helm-docs annotations (@default, @section)
			continue
		}
		lines = append(lines, helmDocsMarker.ReplaceAllString(line, ""))
	}
	return strings.Join(lines, " ")
}
