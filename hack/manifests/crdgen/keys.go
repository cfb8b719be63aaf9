package crdgen

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Where a known key comes from.
const (
	fromValues   = "values.yaml"
	fromComment  = "a values.yaml comment"
	fromTemplate = "a template"
	fromSchema   = "the schema"
	fromSubchart = "a subchart"
)

// keyNode is what is known of one object of the spec: the keys it may hold, and whether they
// are checked at all.
type keyNode struct {
	children map[string]*keyNode
	from     map[string]bool
	// free: its keys are data (an empty map or null in values.yaml, a map or an object of any
	// keys in the schema), so any key is right.
	free bool
	// whole says where a template reads it whole ("" when none does): any key below may matter.
	whole string
	// closed: the CRD refuses keys it does not name, so no warning is needed.
	closed bool
	// leaf: values.yaml or the schema give it a list or a scalar.
	leaf bool
}

func (n *keyNode) child(name, from string) *keyNode {
	if n.children == nil {
		n.children = map[string]*keyNode{}
	}
	c := n.children[name]
	if c == nil {
		c = &keyNode{from: map[string]bool{}}
		n.children[name] = c
	}
	c.from[from] = true
	return c
}

func (n *keyNode) at(path []string, from string) *keyNode {
	for _, k := range path {
		n = n.child(k, from)
	}
	return n
}

// Keys is what make manifests knows of the keys a kind's spec may hold and a template of its
// chart reads. It decides which objects of the spec the typo warnings check.
type Keys struct {
	root *keyNode
	// tplOfValues is where a template renders values with tpl (Reads.TplOfValues).
	tplOfValues string
}

// KnownKeys gathers the keys of a chart's spec: those its values.yaml files (its subcharts'
// under their keys) set or mention in comments, those its templates read, those spec describes
// (the CRD's spec schema), the subcharts' keys and `global`, and the paths of the subcharts'
// conditions and tags.
func KnownKeys(ch *chart.Chart, reads *Reads, spec *apiextv1.JSONSchemaProps) *Keys {
	root := &keyNode{from: map[string]bool{}}
	var addChart func(c *chart.Chart, scope []string)
	addChart = func(c *chart.Chart, scope []string) {
		at := root.at(scope, fromSubchart)
		for k, v := range c.Values { // a chart's own values are never free keys, however few
			addDefaults(at.child(k, fromValues), v)
		}
		for _, f := range c.Raw {
			if f.Name == "values.yaml" {
				for _, p := range CommentedKeys(f.Data) {
					at.at(p, fromComment)
				}
			}
		}
		for _, d := range Dependencies(c) {
			addChart(d.Chart, append(slices.Clone(scope), d.Key))
		}
	}
	addChart(ch, nil)
	root.child("global", fromSubchart).free = true
	if spec != nil {
		addSchema(root, spec)
	}
	for _, p := range reads.Read {
		root.at(p, fromTemplate)
	}
	for _, p := range reads.Whole {
		n := root.at(p, fromTemplate)
		if n.whole == "" {
			n.whole = reads.Why[strings.Join(p, ".")]
		}
	}
	return &Keys{root: root, tplOfValues: reads.TplOfValues}
}

// addDefaults adds the keys a default value sets below n.
func addDefaults(n *keyNode, v any) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			n.free = true // a map whose keys are the user's
		}
		for k, child := range x {
			addDefaults(n.child(k, fromValues), child)
		}
	case nil:
		n.free = true // any value
	default:
		n.leaf = true
	}
}

// addSchema adds what a CRD spec schema says of the keys below n.
func addSchema(n *keyNode, s *apiextv1.JSONSchemaProps) {
	switch {
	case s.Type == "array" || (s.Type != "" && s.Type != "object") || s.XIntOrString:
		n.leaf = true
	case s.AdditionalProperties != nil || (len(s.Properties) == 0 && ptrIs(s.XPreserveUnknownFields)):
		n.free = true
	case len(s.Properties) > 0 && !ptrIs(s.XPreserveUnknownFields):
		n.closed = true
	}
	for name, p := range s.Properties {
		addSchema(n.child(name, fromSchema), &p)
	}
}

func ptrIs(b *bool) bool { return b != nil && *b }

// KeyCheck is one object of the spec whose keys the typo warnings check, and the keys it may
// hold.
type KeyCheck struct {
	Path  []string // below spec; empty for spec itself
	Known []string
}

// Checks returns the objects of the spec whose keys are checked: spec and every object with
// known keys, but those whose keys are free, which a template reads whole, or which the CRD
// closes, and what is below them. Unchecked, when spec itself is not checked, says why.
func (k *Keys) Checks() (checks []KeyCheck, unchecked string) {
	if k.root.whole != "" {
		return nil, "the templates read the values whole (" + k.root.whole + "): any key may be read"
	}
	var walk func(n *keyNode, path []string)
	walk = func(n *keyNode, path []string) {
		if n.free || n.whole != "" || (n.leaf && len(path) > 0) {
			return
		}
		if !n.closed && (len(path) == 0 || len(n.children) > 0) {
			checks = append(checks, KeyCheck{Path: path, Known: slices.Sorted(maps.Keys(n.children))})
		}
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			walk(n.children[name], append(slices.Clone(path), name))
		}
	}
	walk(k.root, nil)
	if k.root.closed && len(checks) == 0 {
		return nil, "the CRD refuses the keys its schema does not name, and names no open object"
	}
	return checks, ""
}

// TplOfValues is where a template renders values with tpl, "" when none does: a string a
// resource's values bring may then read keys no template reads.
func (k *Keys) TplOfValues() string { return k.tplOfValues }

// ReadWhole returns the objects with known keys that templates read whole (the outermost ones),
// with where: their keys are not checked.
func (k *Keys) ReadWhole() []string {
	var out []string
	var walk func(n *keyNode, path []string)
	walk = func(n *keyNode, path []string) {
		if n.whole != "" && len(path) > 0 {
			if len(n.children) > 0 { // what would be checked, were it not read whole
				out = append(out, fmt.Sprintf("%s (%s)", strings.Join(path, "."), n.whole))
			}
			return
		}
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			walk(n.children[name], append(slices.Clone(path), name))
		}
	}
	walk(k.root, nil)
	return out
}

// Undescribed returns the keys that only values.yaml's comments mention or only templates read:
// no default nor schema describes them, so the CRD cannot type them, and accepts them as
// unknown fields of an open object.
func (k *Keys) Undescribed() []string { return k.onlyFrom(fromComment, fromTemplate) }

// onlyFrom returns the outermost keys known from nothing but the given sources.
func (k *Keys) onlyFrom(sources ...string) []string {
	var out []string
	var walk func(n *keyNode, path []string)
	walk = func(n *keyNode, path []string) {
		if len(path) > 0 {
			only := len(n.from) > 0
			for f := range n.from {
				if !slices.Contains(sources, f) {
					only = false
				}
			}
			if only {
				out = append(out, strings.Join(path, "."))
				return
			}
		}
		if n.free || n.whole != "" {
			return
		}
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			walk(n.children[name], append(slices.Clone(path), name))
		}
	}
	walk(k.root, nil)
	return out
}
