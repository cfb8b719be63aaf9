package crdgen

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// A CRD schema is an OpenAPI v3.0 subset that the apiserver requires to be structural: every
// node has one type (or keeps unknown fields, or is int-or-string), an object has properties or
// additionalProperties, never both, and the logical junctors (allOf, oneOf, anyOf, not) may only
// repeat what the structure already says. Real values.schema.json files are JSON Schema
// (draft-07 to 2020-12): references, type lists, junctors that carry structure, and keywords
// the apiserver does not know. structuralizer turns such a document into the nearest
// structural schema; whatever it loosens stays checked, because Helm validates the values
// against the whole values.schema.json at every install and upgrade.

// crdKeywords are the JSON Schema keywords a CRD schema holds; any other keyword is dropped
// (x-kubernetes-* extensions pass through).
var crdKeywords = []string{
	"type", "format", "description", "default", "nullable", "enum",
	"maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "multipleOf",
	"maxLength", "minLength", "pattern", "maxItems", "minItems", "maxProperties", "minProperties",
	"required", "items", "properties", "additionalProperties",
}

// crdFormats are the string and number formats the apiserver checks; another format is
// dropped (the apiserver would ignore it, and warn).
var crdFormats = []string{
	"bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3",
	"uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor",
	"byte", "password", "date", "duration", "datetime", "date-time", "int32", "int64", "float", "double",
}

var scalarTypes = []string{"string", "integer", "number", "boolean"}

type structuralizer struct {
	root      map[string]any
	keep      map[string]bool // paths whose default is kept
	expanding []string        // the $refs being expanded, outermost first
	// defaults are the chart's default values (values.yaml, its subcharts' coalesced in): a
	// required key they give is not required of a resource (see requiredOf).
	defaults map[string]any
}

// resolve returns the schema a local reference ("#/definitions/x", "#/$defs/x", any JSON
// pointer into the document) points at.
func (s *structuralizer) resolve(ref, path string) (map[string]any, error) {
	pointer, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("%s: $ref %q: only references within values.schema.json (#/definitions/..., #/$defs/...) can be resolved", path, ref)
	}
	var node any = s.root
	for _, token := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if token == "" {
			continue
		}
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		m, ok := node.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: $ref %q: no such schema in values.schema.json", path, ref)
		}
		if node, ok = m[token]; !ok {
			return nil, fmt.Errorf("%s: $ref %q: no such schema in values.schema.json", path, ref)
		}
	}
	target, ok := node.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: $ref %q: does not point at a schema object", path, ref)
	}
	return target, nil
}

// flatten returns node with its $ref and allOf folded in: the referenced schema merged under
// the node's own keywords (JSON Schema 2019+ lets them stand beside $ref), and each allOf
// member merged into it. A reference to a schema being expanded by this node or an ancestor
// (a recursive type) makes it an open node (recursive): a structural schema cannot recurse.
// The references it expands stay on s.expanding; node pops them once its children are done.
func (s *structuralizer) flatten(node map[string]any, path string) (map[string]any, bool, error) {
	out := copyMap(node)
	if ref, ok := out["$ref"].(string); ok {
		delete(out, "$ref")
		if slices.Contains(s.expanding, ref) {
			return nil, true, nil
		}
		target, err := s.resolve(ref, path)
		if err != nil {
			return nil, false, err
		}
		s.expanding = append(s.expanding, ref)
		flat, recursive, err := s.flatten(target, path)
		if err != nil || recursive {
			return nil, recursive, err
		}
		out = merge(out, flat)
	}
	if all, ok := out["allOf"].([]any); ok {
		delete(out, "allOf")
		for i, member := range all {
			m, ok := member.(map[string]any)
			if !ok {
				return nil, false, fmt.Errorf("%s: allOf[%d]: must be a schema object", path, i)
			}
			flat, recursive, err := s.flatten(m, path)
			if err != nil || recursive {
				return nil, recursive, err
			}
			out = merge(out, flat)
		}
	}
	return out, false, nil
}

// merge returns dst with what src adds: properties merged by name, required and validation
// rules joined, and any other keyword src has that dst lacks.
func merge(dst, src map[string]any) map[string]any {
	out := copyMap(dst)
	for k, v := range src {
		switch k {
		case "properties":
			props, _ := out[k].(map[string]any)
			props = copyMap(props)
			for name, child := range v.(map[string]any) {
				if have, ok := props[name].(map[string]any); ok {
					if c, ok := child.(map[string]any); ok {
						props[name] = merge(have, c)
						continue
					}
				}
				props[name] = child
			}
			out[k] = props
		case "required", "x-kubernetes-validations":
			have, _ := out[k].([]any)
			joined := append([]any{}, have...)
			for _, item := range v.([]any) {
				if !slices.Contains(joined, item) || k != "required" {
					joined = append(joined, item)
				}
			}
			out[k] = joined
		default:
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
	}
	return out
}

// alternatives folds oneOf and anyOf into node: a structural schema may not carry structure in
// them, so node gets every property any alternative has and the types they allow; what picks
// one alternative (required, enums, patterns) is left to Helm's validation.
func (s *structuralizer) alternatives(node map[string]any, path string) (map[string]any, error) {
	out := copyMap(node)
	var types []string
	for _, junctor := range []string{"oneOf", "anyOf"} {
		alts, ok := out[junctor].([]any)
		if !ok {
			continue
		}
		delete(out, junctor)
		for i, alt := range alts {
			m, ok := alt.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: %s[%d]: must be a schema object", path, junctor, i)
			}
			flat, recursive, err := s.flatten(m, path)
			if err != nil {
				return nil, err
			}
			if recursive {
				types = append(types, "any")
				continue
			}
			if flat, err = s.alternatives(flat, path); err != nil {
				return nil, err
			}
			types = append(types, typesOf(flat)...)
			structure, err := s.structureOnly(flat, path)
			if err != nil {
				return nil, err
			}
			delete(structure, "type")
			out = mergeAlternative(out, structure)
		}
	}
	if _, typed := out["type"]; !typed && len(types) > 0 {
		if slices.Contains(types, "any") {
			out["x-kubernetes-preserve-unknown-fields"] = true
		} else {
			slices.Sort(types)
			list := make([]any, 0, len(types))
			for _, t := range slices.Compact(types) {
				list = append(list, t)
			}
			out["type"] = list
		}
	}
	delete(out, "not")
	return out, nil
}

// structureOnly is what an alternative of oneOf/anyOf says of the shape of a value: its types,
// properties, items and maps, its nested references resolved, without the checks that hold
// only within that alternative (patterns, enums, bounds, required), which would refuse values
// another alternative admits.
func (s *structuralizer) structureOnly(node map[string]any, path string) (map[string]any, error) {
	out := map[string]any{}
	if types := typesOf(node); !slices.Contains(types, "any") {
		list := make([]any, 0, len(types))
		for _, t := range types {
			list = append(list, t)
		}
		out["type"] = list
	}
	for _, k := range []string{"description", "nullable", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string"} {
		if v, ok := node[k]; ok {
			out[k] = v
		}
	}
	child := func(v any) (any, error) {
		m, ok := v.(map[string]any)
		if !ok {
			return v, nil
		}
		flat, recursive, err := s.flatten(m, path)
		if err != nil || recursive {
			return map[string]any{"x-kubernetes-preserve-unknown-fields": true}, err
		}
		return s.structureOnly(flat, path)
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if v, ok := node[k]; ok {
			c, err := child(v)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
	}
	for _, k := range []string{"properties", "patternProperties"} {
		props, ok := node[k].(map[string]any)
		if !ok {
			continue
		}
		converted := map[string]any{}
		for name, v := range props {
			c, err := child(v)
			if err != nil {
				return nil, err
			}
			converted[name] = c
		}
		out[k] = converted
	}
	return out, nil
}

// mergeAlternative is merge for the alternatives of oneOf/anyOf: a property two alternatives
// type differently allows both types.
func mergeAlternative(dst, src map[string]any) map[string]any {
	out := merge(dst, src)
	dp, _ := dst["properties"].(map[string]any)
	sp, _ := src["properties"].(map[string]any)
	props, _ := out["properties"].(map[string]any)
	for name, d := range dp {
		dm, ok1 := d.(map[string]any)
		sm, ok2 := sp[name].(map[string]any)
		if !ok1 || !ok2 {
			continue
		}
		merged := mergeAlternative(dm, sm)
		if types := append(typesOf(dm), typesOf(sm)...); dm["type"] != nil || sm["type"] != nil {
			list := make([]any, 0, len(types))
			for _, t := range types {
				if !slices.Contains(list, any(t)) {
					list = append(list, t)
				}
			}
			merged["type"] = list
		}
		props[name] = merged
	}
	return out
}

// typesOf lists the types a schema node allows ("any" when it does not say).
func typesOf(node map[string]any) []string {
	switch t := node["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	switch {
	case node["properties"] != nil || node["additionalProperties"] != nil || node["patternProperties"] != nil:
		return []string{"object"}
	case node["items"] != nil:
		return []string{"array"}
	case node["enum"] != nil || node["const"] != nil:
		var out []string
		values, _ := node["enum"].([]any)
		if c, ok := node["const"]; ok {
			values = append(values, c)
		}
		for _, v := range values {
			out = append(out, jsonType(v))
		}
		return out
	}
	return []string{"any"}
}

func jsonType(v any) string {
	switch x := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case int, int64:
		return "integer"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case nil:
		return "null"
	}
	return "any"
}

// setType gives node the one type a structural schema wants for the types the source allows:
// null makes it nullable; string and integer make it int-or-string; integer and number make it
// a number; anything else keeps unknown fields (numberOrString tells which of those still check
// a string or a number).
func setType(node map[string]any, types []string) {
	delete(node, "type")
	if slices.Contains(types, "null") {
		node["nullable"] = true
		types = slices.DeleteFunc(slices.Clone(types), func(t string) bool { return t == "null" })
	}
	slices.Sort(types)
	types = slices.Compact(types)
	switch {
	case len(types) == 1 && types[0] != "any":
		node["type"] = types[0]
	case slices.Equal(types, []string{"integer", "string"}):
		node["x-kubernetes-int-or-string"] = true
	case slices.Equal(types, []string{"integer", "number"}):
		node["type"] = "number"
	default:
		node["x-kubernetes-preserve-unknown-fields"] = true
	}
}

// numberOrString tells types of a number or a string (a float default that an inferred schema
// also takes as a string). A structural schema has no such type, so the node takes any value;
// but the checks of a string and of a number (pattern, lengths, bounds, enum) apply to those
// alone, and stay.
func numberOrString(types []string) bool {
	types = slices.DeleteFunc(slices.Clone(types), func(t string) bool { return t == "null" || t == "integer" })
	slices.Sort(types)
	return slices.Equal(slices.Compact(types), []string{"number", "string"})
}

// Checks of a value that apply to one type only: those of scalars, and those of objects and lists.
var (
	scalarChecks     = []string{"enum", "format", "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
	collectionChecks = []string{"minItems", "maxItems", "minProperties", "maxProperties", "required"}
)

// node converts one schema node and its children. values is the node's path in the chart's
// values, nil below a list or a map of free keys, where values.yaml gives no defaults; keys is
// the same path with anyKey for a map's keys and anyItem for a list's items (givesDefault).
func (s *structuralizer) node(in map[string]any, path string, values, keys []string) (map[string]any, error) {
	depth := len(s.expanding)
	defer func() { s.expanding = s.expanding[:depth] }()
	flat, recursive, err := s.flatten(in, path)
	if err != nil {
		return nil, err
	}
	if recursive {
		return map[string]any{"x-kubernetes-preserve-unknown-fields": true}, nil
	}
	if flat, err = s.alternatives(flat, path); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for k, v := range flat {
		if slices.Contains(crdKeywords, k) || strings.HasPrefix(k, "x-kubernetes-") {
			out[k] = v
		}
	}
	if out["description"] == nil && flat["title"] != nil {
		out["description"] = flat["title"]
	}
	if !s.keep[path] {
		delete(out, "default")
	}
	if c, ok := flat["const"]; ok && out["enum"] == nil {
		out["enum"] = []any{c}
	}
	types := typesOf(flat)
	if out["x-kubernetes-int-or-string"] != true {
		setType(out, types)
	} else {
		delete(out, "type")
	}
	if s.keep[path] {
		scaleReplicas(out)
	}
	if f, ok := out["format"].(string); ok && !slices.Contains(crdFormats, f) {
		delete(out, "format")
	}
	for _, bound := range []string{"Maximum", "Minimum"} {
		if v, ok := out["exclusive"+bound].(float64); ok { // draft-06 and later: the bound itself
			out[strings.ToLower(bound)] = v
			out["exclusive"+bound] = true
		}
	}
	if names, ok := flat["propertyNames"]; ok {
		rule, err := propertyNamesRule(names, path)
		if err != nil {
			return nil, err
		}
		addRule(out, rule)
	}
	if err := s.objectStructure(out, flat, path, values, keys); err != nil {
		return nil, err
	}
	if out["type"] == "object" {
		props, _ := out["properties"].(map[string]any)
		if required := s.requiredOf(out, props, path, values); len(required) > 0 {
			out["required"] = required
		} else {
			delete(out, "required")
		}
	}
	if err := s.arrayStructure(out, flat, path, keys); err != nil {
		return nil, err
	}
	if out["type"] == "object" && out["properties"] == nil && out["additionalProperties"] == nil {
		out["x-kubernetes-preserve-unknown-fields"] = true
	}
	if out["x-kubernetes-preserve-unknown-fields"] == true && out["type"] == nil {
		anyValue(out, types)
	}
	if out["nullable"] == true {
		allowNull(out, path, s.givesDefault(keys))
	}
	return out, nil
}

// scaleReplicas makes the node of the scale subresource's field what it reads and writes, an
// integer (kubectl scale, HPAs), where the apiserver puts the kept default in a null's place.
func scaleReplicas(out map[string]any) {
	delete(out, "nullable")
	if out["x-kubernetes-int-or-string"] == true {
		delete(out, "x-kubernetes-int-or-string")
		delete(out, "pattern")
		out["type"] = "integer"
	}
}

// anyValue drops from a node of any value what constrains a typed value, but for a number or a
// string the checks of those (numberOrString).
func anyValue(out map[string]any, types []string) {
	unchecked := collectionChecks
	if !numberOrString(types) {
		unchecked = append(slices.Clone(scalarChecks), collectionChecks...)
	}
	for _, k := range unchecked {
		delete(out, k)
	}
}

// objectStructure converts properties, additionalProperties and patternProperties into the
// one form a structural object has: named properties (further keys kept unchecked unless the
// source closes the object), or a map of one value schema.
func (s *structuralizer) objectStructure(out, flat map[string]any, path string, values, keys []string) error {
	props, hasProps := flat["properties"].(map[string]any)
	extra := flat["additionalProperties"]
	if extra == nil && flat["unevaluatedProperties"] == false {
		extra = false // draft 2019+: closes the object as additionalProperties: false does here
	}
	patterns, _ := flat["patternProperties"].(map[string]any)
	delete(out, "additionalProperties")
	// A null deletes a key values.yaml gives a default, as in a values file handed to `helm
	// install -f`; a key the schema requires is not deleted (Helm would refuse the values
	// without it), so the apiserver drops its null and the default renders.
	required, _ := flat["required"].([]any)
	if hasProps {
		converted := map[string]any{}
		for _, name := range sortedKeys(props) {
			child, ok := props[name].(map[string]any)
			if !ok {
				if b, isBool := props[name].(bool); isBool && b {
					converted[name] = map[string]any{"x-kubernetes-preserve-unknown-fields": true}
					continue
				}
				return fmt.Errorf("%s.%s: schema must be an object", path, name)
			}
			var childValues []string
			if values != nil {
				childValues = append(slices.Clone(values), name)
			}
			c, err := s.node(child, path+"."+name, childValues, append(slices.Clone(keys), name))
			if err != nil {
				return err
			}
			if _, given := s.defaultAt(values, name); given && !s.keep[path+"."+name] && !slices.Contains(required, any(name)) {
				allowNull(c, path+"."+name, true)
			}
			converted[name] = c
		}
		out["properties"] = converted
		// JSON Schema leaves an object open unless it says otherwise; a structural schema
		// closes it. Only additionalProperties: false (with no patternProperties beside it)
		// closes it here, so that the CRD refuses nothing the chart's schema admits.
		if len(patterns) > 0 || extra != false {
			out["x-kubernetes-preserve-unknown-fields"] = true
		}
		return nil
	}
	switch {
	case len(patterns) == 1 && extra == false:
		pattern := sortedKeys(patterns)[0]
		value, _ := patterns[pattern].(map[string]any)
		c, err := s.node(value, path+"[]", nil, append(slices.Clone(keys), anyKey))
		if err != nil {
			return err
		}
		s.mapValuesNullable(c, path+"[]", values)
		out["additionalProperties"] = c
		addRule(out, map[string]any{
			"rule":    "self.all(k, k.matches(" + strconv.Quote(pattern) + "))",
			"message": fmt.Sprintf("%s: every key must be matching %s", strings.TrimPrefix(path, "spec."), pattern),
			markOwn:   &ownRule{path: path, check: "its patternProperties key pattern"},
		})
	case len(patterns) > 0, extra == true:
		out["x-kubernetes-preserve-unknown-fields"] = true
	default:
		if value, ok := extra.(map[string]any); ok {
			c, err := s.node(value, path+"[]", nil, append(slices.Clone(keys), anyKey))
			if err != nil {
				return err
			}
			s.mapValuesNullable(c, path+"[]", values)
			out["additionalProperties"] = c
		}
	}
	return nil
}

// mapValuesNullable lets the values of the map at values hold null where values.yaml gives the
// map a key: its one value schema is every key's, so a null is taken at a key with no default
// too, which Helm's validation against the whole schema still refuses at the release.
func (s *structuralizer) mapValuesNullable(value map[string]any, path string, values []string) {
	if len(values) == 0 {
		return
	}
	given, _ := s.defaultAt(values[:len(values)-1], values[len(values)-1])
	m, _ := given.(map[string]any)
	for _, v := range m {
		if v != nil {
			allowNull(value, path, true)
			return
		}
	}
}

// allowNull lets a converted node hold null. The apiserver checks an enum before nullable, and no
// enum of a CRD holds null, so the enum of a nullable string, integer or boolean becomes a CEL
// rule, which is not evaluated on null (the apiserver's message names the field); a node whose
// enum cannot be one holds no null (the apiserver drops it, and the default renders).
// deletesDefault says that values.yaml gives the key a default that a null deletes: when the
// rule has to go (budget.go), the enum cannot come back in its place.
func allowNull(node map[string]any, path string, deletesDefault bool) {
	if deletesDefault {
		node[markDeletesDefault] = true
	}
	enum, ok := node["enum"].([]any)
	if !ok {
		node["nullable"] = true
		return
	}
	typ, _ := node["type"].(string)
	var literals, shown []string
	var values []any
	for _, v := range enum {
		if v == nil {
			continue
		}
		if jsonType(v) != typ || !slices.Contains([]string{"string", "integer", "boolean"}, typ) {
			delete(node, "nullable")
			return
		}
		raw, _ := json.Marshal(v)
		shown = append(shown, string(raw))
		values = append(values, v)
		if str, isString := v.(string); isString {
			literals = append(literals, celString(str))
		} else {
			literals = append(literals, string(raw))
		}
	}
	delete(node, "enum")
	node["nullable"] = true
	addRule(node, map[string]any{
		"rule":    "self in [" + strings.Join(literals, ", ") + "]",
		"message": fmt.Sprintf("must be one of %s, or null", strings.Join(shown, ", ")),
		markOwn:   &ownRule{path: path, check: "its enum", enum: values},
	})
}

// arrayStructure gives an array one items schema (a tuple of schemas becomes items of any
// value) and turns uniqueItems into a set list where the items are scalars.
func (s *structuralizer) arrayStructure(out, flat map[string]any, path string, keys []string) error {
	if out["type"] != "array" {
		delete(out, "items")
		return nil
	}
	delete(out, "uniqueItems")
	items, ok := flat["items"].(map[string]any)
	if !ok {
		out["items"] = map[string]any{"x-kubernetes-preserve-unknown-fields": true}
		return nil
	}
	c, err := s.node(items, path+"[]", nil, append(slices.Clone(keys), anyItem))
	if err != nil {
		return err
	}
	out["items"] = c
	if flat["uniqueItems"] == true && slices.Contains(scalarTypes, fmt.Sprint(c["type"])) && c["nullable"] == nil {
		out["x-kubernetes-list-type"] = "set"
	}
	return nil
}

// requiredOf is what an object with these converted properties requires of a resource. Helm
// coalesces values.yaml into the values before it validates them, so a key values.yaml gives
// (not null) is never missing there and is not required of the resource; nor is a key whose
// default the CRD keeps (the apiserver fills it in). A schema's own `default` does not count:
// Helm does not apply it, and refuses the values without the key. A property values.yaml gives
// as an object is required in turn when that object still requires a key: Helm's values always
// hold the object, so they must hold the key too.
func (s *structuralizer) requiredOf(out, props map[string]any, path string, values []string) []any {
	var required []any
	list, _ := out["required"].([]any)
	for _, r := range list {
		name, ok := r.(string)
		if !ok || slices.Contains(required, r) {
			continue
		}
		if _, given := s.defaultAt(values, name); given {
			continue
		}
		if child, _ := props[name].(map[string]any); s.keep[path+"."+name] && child["default"] != nil {
			continue
		}
		required = append(required, name)
	}
	for _, name := range sortedKeys(props) {
		child, _ := props[name].(map[string]any)
		if v, given := s.defaultAt(values, name); given && child["required"] != nil && !slices.Contains(required, any(name)) {
			if _, isObject := v.(map[string]any); isObject {
				required = append(required, name)
			}
		}
	}
	return required
}

// The steps of a node's keys (node) that stand for any key of a map and any item of a list.
const (
	anyKey  = "\x00key"
	anyItem = "\x00item"
)

// givesDefault reports whether values.yaml gives the key at keys a value other than null, at
// any key of the maps on the way: Helm coalesces a map's entries with the user's, so a null
// there deletes it. A list is not coalesced: its items have no defaults.
func (s *structuralizer) givesDefault(keys []string) bool {
	var at func(v any, keys []string) bool
	at = func(v any, keys []string) bool {
		if len(keys) == 0 {
			return v != nil
		}
		m, ok := v.(map[string]any)
		switch {
		case !ok || keys[0] == anyItem:
			return false
		case keys[0] == anyKey:
			return slices.ContainsFunc(slices.Collect(maps.Values(m)), func(v any) bool { return at(v, keys[1:]) })
		}
		child, given := m[keys[0]]
		return given && at(child, keys[1:])
	}
	return at(s.defaults, keys)
}

// defaultAt returns the default values.yaml gives the key name of the object at values, and
// whether it gives one (null is none: Helm removes a key set to null).
func (s *structuralizer) defaultAt(values []string, name string) (any, bool) {
	if values == nil {
		return nil, false
	}
	node := s.defaults
	for _, k := range values {
		child, ok := node[k].(map[string]any)
		if !ok {
			return nil, false
		}
		node = child
	}
	v, ok := node[name]
	return v, ok && v != nil
}

func addRule(node map[string]any, rule map[string]any) {
	rules, _ := node["x-kubernetes-validations"].([]any)
	node["x-kubernetes-validations"] = append(append([]any{}, rules...), rule)
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
