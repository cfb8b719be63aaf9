package crdgen

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/chartapi"
)

// A kind's API changes with its chart, and a stored resource must never lose a value for it: the
// apiserver prunes a field its CRD no longer has from every stored resource on read, and a first
// write of the resource stores the loss. So Evolve compares the CRD about to be written with the
// one it replaces (the committed file, or the CRD a cluster serves) and refuses what would lose
// or invalidate a value a stored resource may hold: a field removed or renamed, a type changed,
// an enum or a range narrowed, a field made required, a new rule. What only adds or widens
// passes. A change that must narrow is declared in kind.yaml: a new version, whose older one the
// CRD keeps serving with the schema it was served with and the operator converts (package
// conversion), every field of which must land somewhere in the newer one or be declared removed;
// or, for the chart's own version, a breaking change accepted with its reason.

// WebhookURL is where the CRD of a kind that converts sends its conversions as `make install`
// writes it: the webhook of an operator run out of cluster (make run). make deploy names the
// webhook's Service instead (config/webhook), and OLM its own.
const WebhookURL = "https://localhost:9443/convert"

// Evolve returns next, the CRD of the chart's own version, with the older versions kind.yaml
// declares as their CRD served them: as the chart keeps them (chartapi.Version.Published), else
// taken from previous, the CRD next replaces (nil: none), and returned by file to keep in the
// chart. It checks that no value a stored resource may hold is lost. Its notes say what changed.
func Evolve(next, previous *apiextv1.CustomResourceDefinition, decl *chartapi.Compiled, chartDir string) (
	*apiextv1.CustomResourceDefinition, []string, map[string][]byte, error) {
	k, own := decl.Kind, next.Spec.Versions[0]
	served := map[string]apiextv1.CustomResourceDefinitionVersion{}
	if previous != nil {
		for _, v := range previous.Spec.Versions {
			served[v.Name] = v
		}
	}
	var refused, notes []string
	var breaking []string
	if len(k.Versions) > 0 {
		for _, b := range k.Versions[0].Breaking {
			breaking = append(breaking, b.Field)
			notes = append(notes, fmt.Sprintf("%s: spec.%s changes in ways stored resources may not fit, accepted: %s", own.Name, b.Field, b.Why))
		}
	}
	if was, ok := served[own.Name]; ok {
		refused = append(refused, changed(was, own, own.Name, func(p string) (string, bool) {
			return p, slices.ContainsFunc(breaking, func(f string) bool { return under(p, "spec."+f) })
		})...)
	}
	versions := []apiextv1.CustomResourceDefinitionVersion{own}
	kept := map[string][]byte{}
	for i, v := range k.Versions {
		if i == 0 {
			continue
		}
		was, err := published(&k.Versions[i], served, chartDir, kept)
		if err != nil {
			refused = append(refused, err.Error())
			continue
		}
		was.Storage, was.Served, was.Deprecated = false, v.IsServed(), true
		was.DeprecationWarning = ptr.To(fmt.Sprintf("%s/%s %s is deprecated; use %s/%s", next.Spec.Group, v.Name, next.Spec.Names.Kind, next.Spec.Group, own.Name))
		versions = append(versions, was)
		refused = append(refused, lands(was, versions[i-1], v.Changes)...)
		refused = append(refused, roundTrip(decl, was, versions[i-1])...)
	}
	for _, v := range previousVersions(previous) {
		if slices.ContainsFunc(versions, func(w apiextv1.CustomResourceDefinitionVersion) bool { return w.Name == v.Name }) {
			continue
		}
		if v.Served {
			refused = append(refused, fmt.Sprintf("%s: served by the CRD this one replaces, and not declared: declare it in kind.yaml versions "+
				"with its changes to the next newer version (or, to drop it, first stop serving it: served: false)", v.Name))
		} else {
			notes = append(notes, fmt.Sprintf("%s: no longer in the CRD; the apiserver refuses this CRD while its status.storedVersions "+
				"lists it (the operator migrates stored resources to %s, then trims it)", v.Name, own.Name))
		}
	}
	if len(refused) > 0 {
		return nil, nil, nil, fmt.Errorf("%s: the CRD would lose or refuse values stored resources may hold:\n  %s", next.Name, strings.Join(refused, "\n  "))
	}
	next.Spec.Versions = versions
	if len(versions) > 1 {
		next.Spec.Conversion = &apiextv1.CustomResourceConversion{Strategy: apiextv1.WebhookConverter, Webhook: &apiextv1.WebhookConversion{
			ConversionReviewVersions: []string{"v1"}, ClientConfig: &apiextv1.WebhookClientConfig{URL: ptr.To(WebhookURL)}}}
		notes = append(notes, fmt.Sprintf("versions %v, stored as %s; older ones converted by the operator's webhook", decl.VersionNames(), own.Name))
	}
	for path := range kept {
		notes = append(notes, fmt.Sprintf("%s: keeps an older version as its CRD served it", path))
	}
	return next, notes, kept, Validate(next)
}

// published is an older version as its CRD served it: as the chart keeps it, else as served
// says, then also added to keep by the file the chart keeps it in and set on v, for the
// conversion's round trip.
func published(v *chartapi.Version, served map[string]apiextv1.CustomResourceDefinitionVersion, chartDir string,
	keep map[string][]byte) (apiextv1.CustomResourceDefinitionVersion, error) {
	var was apiextv1.CustomResourceDefinitionVersion
	file := chartapi.PublishedFile(chartDir, v.Name)
	if v.Published == nil {
		var ok bool
		if was, ok = served[v.Name]; !ok {
			return was, fmt.Errorf("%s: neither the chart (%s) nor the CRD this one replaces has it: an older version is kept as it was served", v.Name, file)
		}
		raw, err := yaml.Marshal(was)
		if err != nil {
			return was, err
		}
		keep[file] = append([]byte("# Written by `make manifests`: "+v.Name+" as its CRD served it, kept while the chart serves it. Do not edit.\n"), raw...)
		return was, yaml.Unmarshal(raw, &v.Published)
	}
	raw, err := json.Marshal(v.Published)
	if err == nil {
		err = json.Unmarshal(raw, &was)
	}
	if err != nil {
		return was, fmt.Errorf("%s: %w", file, err)
	}
	if now, ok := served[v.Name]; ok && showJSON(now.Schema) != showJSON(was.Schema) {
		return was, fmt.Errorf("%s: %s is not the schema the CRD this one replaces serves: an older version is kept as it was served", v.Name, file)
	}
	return was, nil
}

// previousVersions are the versions of previous; none when it is nil.
func previousVersions(previous *apiextv1.CustomResourceDefinition) []apiextv1.CustomResourceDefinitionVersion {
	if previous == nil {
		return nil
	}
	return previous.Spec.Versions
}

// under reports whether path (spec.a.b[*].c) is field or below it.
func under(path, field string) bool {
	return path == field || strings.HasPrefix(path, field+".") || strings.HasPrefix(path, field+"[")
}

// lands lists the fields of older that have no place in newer: every field lands at its own path,
// where a move sends it, or is consumed by a compute or declared removed; and there, it must fit.
func lands(older, newer apiextv1.CustomResourceDefinitionVersion, changes []chartapi.Change) []string {
	var out []string
	for _, c := range changes {
		if c.Compute != nil && node(newer, "spec."+c.Compute.To) == nil {
			out = append(out, fmt.Sprintf("%s: compute %s: %s has no spec.%s", older.Name, c.Compute.To, newer.Name, c.Compute.To))
		}
	}
	return append(out, changed(older, newer, older.Name+" to "+newer.Name, func(p string) (string, bool) {
		for _, c := range changes {
			switch {
			case c.Remove != nil && under(p, "spec."+c.Remove.Field),
				c.Compute != nil && slices.ContainsFunc(c.Compute.From, func(f string) bool { return under(p, "spec."+f) }):
				return "", true
			case c.Move != nil && under(p, "spec."+c.Move.From):
				return "spec." + c.Move.To + strings.TrimPrefix(p, "spec."+c.Move.From), false
			}
		}
		return p, false
	})...)
}

// changed compares the spec schema of was with that of now, field by field: where(path) is the
// field's path in now, or done when a declaration takes care of it and below.
func changed(was, now apiextv1.CustomResourceDefinitionVersion, what string, where func(path string) (string, bool)) []string {
	var out []string
	var walk func(old *apiextv1.JSONSchemaProps, path string)
	walk = func(old *apiextv1.JSONSchemaProps, path string) {
		to, done := where(path)
		if done {
			return
		}
		n := node(now, to)
		if n == nil {
			out = append(out, fmt.Sprintf("%s: %s: %s has no %s (removed, or renamed? a new version's move says where it goes)", what, path, now.Name, to))
			return
		}
		for _, c := range narrowed(old, n) {
			out = append(out, fmt.Sprintf("%s: %s: %s", what, path, c))
		}
		for _, name := range slices.Sorted(maps.Keys(old.Properties)) {
			child := old.Properties[name]
			walk(&child, path+"."+name)
		}
		if old.AdditionalProperties != nil && old.AdditionalProperties.Schema != nil {
			walk(old.AdditionalProperties.Schema, path+"[*]")
		}
		if old.Items != nil && old.Items.Schema != nil {
			walk(old.Items.Schema, path+"[*]")
		}
	}
	if spec := node(was, "spec"); spec != nil {
		walk(spec, "spec")
	}
	return out
}

// node is the schema at path (spec.a.b[*].c) of a version; nil when it has none.
func node(v apiextv1.CustomResourceDefinitionVersion, path string) *apiextv1.JSONSchemaProps {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil
	}
	n := v.Schema.OpenAPIV3Schema
	for _, step := range strings.Split(strings.ReplaceAll(path, "[*]", ".[*]"), ".") {
		switch child, ok := n.Properties[step]; {
		case step == "[*]" && n.AdditionalProperties != nil && n.AdditionalProperties.Schema != nil:
			n = n.AdditionalProperties.Schema
		case step == "[*]" && n.Items != nil && n.Items.Schema != nil:
			n = n.Items.Schema
		case ok:
			n = &child
		default:
			return nil
		}
	}
	return n
}

// narrowed lists what a stored value that old admits could be refused or lost for in now.
func narrowed(old, now *apiextv1.JSONSchemaProps) []string {
	var out []string
	say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if was, is := typeOf(old), typeOf(now); was != is && is != "any" && !widens(was, is) {
		say("type %s became %s", was, is)
	}
	if old.Nullable && !now.Nullable {
		say("no longer takes null")
	}
	if is, limited := enumOf(now); limited {
		was, wasLimited := enumOf(old)
		if !wasLimited {
			say("an enum now limits it")
		}
		for _, e := range was {
			if !slices.Contains(is, e) {
				say("its enum no longer takes %s", e)
			}
		}
	}
	out = append(out, narrowedBounds(old, now)...)
	for k, v := range map[string][2]string{"pattern": {old.Pattern, now.Pattern}, "format": {old.Format, now.Format}} {
		if v[1] != "" && v[1] != v[0] {
			say("%s %q now checks it", k, v[1])
		}
	}
	if now.MultipleOf != nil && !reflect.DeepEqual(old.MultipleOf, now.MultipleOf) {
		say("multipleOf %v now checks it", *now.MultipleOf)
	}
	for _, r := range now.Required {
		if !slices.Contains(old.Required, r) {
			say("now requires %s", r)
		}
	}
	for _, r := range now.XValidations {
		if _, enum := enumRule(r); !enum && !slices.ContainsFunc(old.XValidations, func(o apiextv1.ValidationRule) bool { return o.Rule == r.Rule }) {
			say("a new rule checks it: %s", r.Rule)
		}
	}
	if ptr.Deref(old.XPreserveUnknownFields, false) && !ptr.Deref(now.XPreserveUnknownFields, false) {
		say("no longer keeps the fields it does not name")
	}
	return out
}

// narrowedBounds lists the bounds of now tighter than those of old.
func narrowedBounds(old, now *apiextv1.JSONSchemaProps) []string {
	var out []string
	bound := func(name string, was, is *float64, lower bool) {
		if is != nil && (was == nil || lower && *is > *was || !lower && *is < *was) {
			out = append(out, fmt.Sprintf("%s narrowed to %v", name, *is))
		}
	}
	bound("minimum", old.Minimum, now.Minimum, true)
	bound("maximum", old.Maximum, now.Maximum, false)
	if now.ExclusiveMinimum && !old.ExclusiveMinimum || now.ExclusiveMaximum && !old.ExclusiveMaximum {
		out = append(out, "a bound is now exclusive")
	}
	asFloat := func(v *int64) *float64 {
		if v == nil {
			return nil
		}
		return ptr.To(float64(*v))
	}
	bound("minLength", asFloat(old.MinLength), asFloat(now.MinLength), true)
	bound("maxLength", asFloat(old.MaxLength), asFloat(now.MaxLength), false)
	bound("minItems", asFloat(old.MinItems), asFloat(now.MinItems), true)
	bound("maxItems", asFloat(old.MaxItems), asFloat(now.MaxItems), false)
	bound("minProperties", asFloat(old.MinProperties), asFloat(now.MinProperties), true)
	bound("maxProperties", asFloat(old.MaxProperties), asFloat(now.MaxProperties), false)
	return out
}

// enumOf is the values a node's enum admits, as JSON: its OpenAPI enum, or the rule the
// generator writes for an enum that lets null pass (allowNull); limited is false without either.
func enumOf(s *apiextv1.JSONSchemaProps) (values []string, limited bool) {
	for _, e := range s.Enum {
		values = append(values, string(e.Raw))
	}
	for _, r := range s.XValidations {
		if vs, ok := enumRule(r); ok {
			values = append(values, vs...)
		}
	}
	return values, len(s.Enum) > 0 || values != nil
}

// enumRule reads the values of a rule the generator wrote for an enum that lets null pass
// (`must be one of "a", "b", or null`).
func enumRule(r apiextv1.ValidationRule) ([]string, bool) {
	list, prefixed := strings.CutPrefix(r.Message, "must be one of ")
	list, suffixed := strings.CutSuffix(list, ", or null")
	if !prefixed || !suffixed || !strings.HasPrefix(r.Rule, "self in [") {
		return nil, false
	}
	var values []any
	if json.Unmarshal([]byte("["+list+"]"), &values) != nil {
		return nil, false
	}
	var out []string
	for _, v := range values {
		raw, _ := json.Marshal(v)
		out = append(out, string(raw))
	}
	return out, true
}

// widens reports whether a value of type was is always one of type is too.
func widens(was, is string) bool {
	return is == "int-or-string" && (was == "string" || was == "integer") || is == "number" && was == "integer"
}

// typeOf names what a schema node types a value as.
func typeOf(s *apiextv1.JSONSchemaProps) string {
	switch {
	case s.XIntOrString:
		return "int-or-string"
	case s.Type == "":
		return "any"
	}
	return s.Type
}

// roundTrip converts a resource of older that sets every field its schema has through newer
// and back, and says so where the resource does not come back as it was stored.
func roundTrip(decl *chartapi.Compiled, older, newer apiextv1.CustomResourceDefinitionVersion) []string {
	stored, _ := sample(node(older, "spec"), 0).(map[string]any)
	kept := chartapi.Kept{}
	up, err := decl.Convert(stored, older.Name, newer.Name, kept)
	if err != nil {
		return []string{fmt.Sprintf("%s to %s: converting %s: %v", older.Name, newer.Name, showJSON(stored), err)}
	}
	back, err := decl.Convert(up, newer.Name, older.Name, kept)
	if err != nil {
		return []string{fmt.Sprintf("%s to %s: converting %s back: %v", older.Name, newer.Name, showJSON(up), err)}
	}
	if !reflect.DeepEqual(back, stored) {
		return []string{fmt.Sprintf("%s to %s and back does not give back what was stored: %s became %s, then %s",
			older.Name, newer.Name, showJSON(stored), showJSON(up), showJSON(back))}
	}
	return nil
}

// sample is a value that the schema node admits and sets every field it names.
func sample(s *apiextv1.JSONSchemaProps, depth int) any {
	switch {
	case s == nil || depth > 8:
		return nil
	case len(s.Enum) > 0:
		var v any
		_ = json.Unmarshal(s.Enum[0].Raw, &v)
		return normalise(v)
	}
	switch typeOf(s) {
	case "object":
		out := map[string]any{}
		for name, child := range s.Properties {
			if v := sample(&child, depth+1); v != nil {
				out[name] = v
			}
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			if v := sample(s.AdditionalProperties.Schema, depth+1); v != nil {
				out["key"] = v
			}
		}
		return out
	case "array":
		if s.Items != nil {
			if v := sample(s.Items.Schema, depth+1); v != nil {
				return []any{v}
			}
		}
		return []any{}
	case "integer", "int-or-string":
		return int64(ptr.Deref(s.Minimum, 7))
	case "number":
		return ptr.Deref(s.Minimum, 7.5)
	case "boolean":
		return true
	case "string":
		return strings.Repeat("a", int(max(ptr.Deref(s.MinLength, 1), 1)))
	}
	return "any"
}

// normalise makes whole numbers int64, as a decoded resource holds them.
func normalise(v any) any {
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return int64(f)
	}
	return v
}

func showJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
