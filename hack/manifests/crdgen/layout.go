package crdgen

import (
	"maps"
	"slices"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Layout is what a CRD's spec schema checks, path by path, for make manifests to tell.
type Layout struct {
	// Typed are the keys whose values the CRD types (a scalar, a list, an object of named keys,
	// a number or a string whose string is checked).
	Typed [][]string
	// Open are the objects that keep unknown keys beside their typed ones.
	Open [][]string
	// Closed are the objects that refuse keys they do not name.
	Closed [][]string
	// Free are the objects whose keys are all free (maps, objects of any keys), and the values of
	// any type.
	Free [][]string
	// Required are the keys a resource must give.
	Required [][]string
}

// SpecLayout walks a spec schema.
func SpecLayout(spec *apiextv1.JSONSchemaProps) Layout {
	var l Layout
	var walk func(s *apiextv1.JSONSchemaProps, path []string)
	walk = func(s *apiextv1.JSONSchemaProps, path []string) {
		for _, r := range s.Required {
			l.Required = append(l.Required, append(slices.Clone(path), r))
		}
		preserve := s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
		switch {
		case len(s.Properties) > 0 && preserve:
			l.Open = append(l.Open, path)
		case len(s.Properties) > 0:
			l.Closed = append(l.Closed, path)
		case s.AdditionalProperties != nil || (preserve && !checksScalar(s)):
			if len(path) > 0 {
				l.Free = append(l.Free, path)
			}
			return
		case len(path) > 0:
			l.Typed = append(l.Typed, path)
		}
		if s.Items != nil && s.Items.Schema != nil && len(s.Items.Schema.Properties) > 0 {
			walk(s.Items.Schema, append(slices.Clone(path), "[]"))
		}
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			p := s.Properties[name]
			walk(&p, append(slices.Clone(path), name))
		}
	}
	walk(spec, nil)
	return l
}

// checksScalar tells a node of no type that still checks a number or a string it holds (a
// pattern, lengths, bounds, an enum): a number or a string (numberOrString), not any value.
func checksScalar(s *apiextv1.JSONSchemaProps) bool {
	return s.Pattern != "" || s.MinLength != nil || s.MaxLength != nil || s.Minimum != nil || s.Maximum != nil ||
		s.MultipleOf != nil || len(s.Enum) > 0 || s.Format != ""
}

// Compact writes paths as one line, siblings grouped in braces: image.{repository,tag}.
func Compact(paths [][]string) string {
	type node struct {
		children map[string]*node
		end      bool
	}
	root := &node{children: map[string]*node{}}
	for _, p := range paths {
		n := root
		for _, k := range p {
			c := n.children[k]
			if c == nil {
				c = &node{children: map[string]*node{}}
				n.children[k] = c
			}
			n = c
		}
		n.end = true
	}
	var write func(n *node) []string
	write = func(n *node) []string {
		var out []string
		names := make([]string, 0, len(n.children))
		for k := range n.children {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			c := n.children[k]
			label := k
			if strings.ContainsAny(k, ".{},") {
				label = `"` + k + `"`
			}
			sub := write(c)
			sep := "."
			if len(sub) == 1 && strings.HasPrefix(sub[0], "[]") {
				sep = ""
			}
			if c.end || len(sub) == 0 {
				out = append(out, label)
			}
			switch {
			case len(sub) == 1:
				out = append(out, label+sep+sub[0])
			case len(sub) > 1:
				out = append(out, label+".{"+strings.Join(sub, ",")+"}")
			}
		}
		return out
	}
	return strings.Join(write(root), ", ")
}
