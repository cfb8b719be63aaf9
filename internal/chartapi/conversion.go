package chartapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Kept holds, by version, the values of that version's fields that a conversion away from it
// had no place for (a field a newer version removed, or one an older version does not know), by
// dotted path; a conversion back to the version puts them back. It travels with the resource
// (an annotation), so that converting a resource to another version and back gives back what
// was stored, whichever way the versions differ.
type Kept map[string]map[string]any

// Convert converts a spec of version from to version to, along the declared versions, one
// version at a time; kept is read and updated. A kind of one version converts nothing.
func (c *Compiled) Convert(spec map[string]any, from, to string, kept Kept) (map[string]any, error) {
	i, j := c.versionIndex(from), c.versionIndex(to)
	if i < 0 || j < 0 {
		return nil, fmt.Errorf("cannot convert from %s to %s: the kind's versions are %v", from, to, c.VersionNames())
	}
	var err error
	for ; i > j && err == nil; i-- {
		spec, err = c.up(i, spec, kept)
	}
	for ; i < j && err == nil; i++ {
		spec, err = c.down(i+1, spec, kept)
	}
	return spec, err
}

// Fits tells what the schema each older version was served with holds (as the chart keeps it):
// a field, by its path in the spec, named by its object, under a map's values, in a list's
// items (the path element itemElem), or under an object that keeps unknown fields. A version
// the chart keeps no schema of holds nothing: what a conversion to it would drop is kept instead.
func (c *Compiled) Fits(version string, path []string) bool {
	i := c.versionIndex(version)
	if i < 0 {
		return false
	}
	node := c.Kind.Versions[i].SpecSchema()
	for _, key := range path {
		switch props, _ := node["properties"].(map[string]any); {
		case node == nil:
			return false
		case node["x-kubernetes-preserve-unknown-fields"] == true:
			return true
		case key == itemElem:
			node, _ = node["items"].(map[string]any)
		case props[key] != nil:
			node, _ = props[key].(map[string]any)
		default:
			node, _ = node["additionalProperties"].(map[string]any)
		}
	}
	return node != nil
}

// VersionNames are the kind's versions, newest first; none when it declares none.
func (c *Compiled) VersionNames() []string {
	var out []string
	for _, v := range c.Kind.Versions {
		out = append(out, v.Name)
	}
	return out
}

func (c *Compiled) versionIndex(name string) int {
	return slices.IndexFunc(c.Kind.Versions, func(v Version) bool { return v.Name == name })
}

// up converts a spec of version i to version i-1: the fields of version i-1 kept when it was
// converted to version i put back, then the changes of version i in order. The kept fields go
// back first because down kept them at their paths in version i's layout: a change that moves
// their parent carries them along.
func (c *Compiled) up(i int, old map[string]any, kept Kept) (map[string]any, error) {
	v, newer := c.Kind.Versions[i], c.Kind.Versions[i-1].Name
	out := runtime.DeepCopyJSON(old)
	for _, path := range slices.Sorted(maps.Keys(kept[newer])) {
		keys, val := keysOf(path), kept[newer][path]
		have, set := get(out, path)
		_, parentSet := get(out, pathOf(keys[:len(keys)-1]))
		list, isList := have.([]any)
		items, keptList := val.([]any)
		switch fits := c.Fits(v.Name, keys); {
		case !fits && !set && parentSet: // an object the older version's client removed stays removed
			put(out, path, val)
		case fits && isList && keptList: // a list whose items held fields version i has no place for
			put(out, path, c.rejoin(v.Name, keys, list, items))
		}
	}
	delete(kept, newer)
	for _, ch := range v.Changes {
		switch {
		case ch.Move != nil:
			if val, ok := take(out, ch.Move.From); ok {
				put(out, ch.Move.To, val)
			}
		case ch.Compute != nil:
			if !slices.ContainsFunc(ch.Compute.From, func(f string) bool { _, ok := get(old, f); return ok }) {
				continue // nothing to compute from: the field stays unset
			}
			val, err := c.evaluateAny(ch.Compute.Expression, old)
			if err != nil {
				return nil, fmt.Errorf("%s to %s: compute %s: %w", v.Name, newer, ch.Compute.To, err)
			}
			for _, f := range ch.Compute.From {
				take(out, f)
			}
			if val != nil {
				put(out, ch.Compute.To, val)
			}
		case ch.Remove != nil:
			if val, ok := take(out, ch.Remove.Field); ok {
				keep(kept, v.Name, ch.Remove.Field, val)
			}
		}
	}
	return out, nil
}

// rejoin gives back each item of list (the list at path, as version holds it) that is still as
// one of the kept items (the list as the newer version held it) shows at version: that kept item
// whole, with the fields version has no place for. The item at the same position is tried first,
// then every other (the list was reordered). An item edited or added at version stays as written.
func (c *Compiled) rejoin(version string, path []string, list, kept []any) []any {
	seen := make([][]byte, len(kept)) // each kept item as version shows it
	for j, item := range kept {
		if obj, ok := item.(map[string]any); ok {
			view := runtime.DeepCopyJSON(obj)
			dropUnfit(view, append(slices.Clone(path), itemElem), func(p []string, _ any) bool { return !c.Fits(version, p) })
			item = view
		}
		seen[j], _ = json.Marshal(item) // JSON: the kept items' numbers come back from the annotation as float64
	}
	out, used, done := slices.Clone(list), make([]bool, len(kept)), make([]bool, len(list))
	match := func(n, j int) bool {
		if raw, _ := json.Marshal(list[n]); used[j] || !bytes.Equal(raw, seen[j]) {
			return false
		}
		out[n], used[j] = kept[j], true
		return true
	}
	for n := range min(len(list), len(kept)) {
		done[n] = match(n, n)
	}
	for n := range list {
		for j := 0; !done[n] && j < len(kept); j++ {
			done[n] = match(n, j)
		}
	}
	return out
}

// down converts a spec of version i-1 to version i: the changes of version i undone, last first,
// then the fields version i does not hold kept for version i-1, at their paths in version i's
// layout. A field of a list's item is kept as the whole list it is in, as it was (rejoin).
func (c *Compiled) down(i int, newer map[string]any, kept Kept) (map[string]any, error) {
	v := c.Kind.Versions[i]
	out := runtime.DeepCopyJSON(newer)
	for n := len(v.Changes) - 1; n >= 0; n-- {
		switch ch := v.Changes[n]; {
		case ch.Move != nil:
			if val, ok := take(out, ch.Move.To); ok {
				put(out, ch.Move.From, val)
			}
		case ch.Compute != nil:
			if _, ok := take(out, ch.Compute.To); !ok {
				continue
			}
			for _, f := range slices.Sorted(maps.Keys(ch.Compute.Back)) {
				val, err := c.evaluateAny(ch.Compute.Back[f], newer)
				if err != nil {
					return nil, fmt.Errorf("%s to %s: compute %s back %s: %w", c.Kind.Versions[i-1].Name, v.Name, ch.Compute.To, f, err)
				}
				if val != nil {
					put(out, f, val)
				}
			}
		case ch.Remove != nil:
			if val, ok := kept[v.Name][ch.Remove.Field]; ok {
				put(out, ch.Remove.Field, val)
				delete(kept[v.Name], ch.Remove.Field)
			}
		}
	}
	if len(kept[v.Name]) == 0 {
		delete(kept, v.Name)
	}
	whole := runtime.DeepCopyJSON(out)
	dropUnfit(out, nil, func(path []string, val any) bool {
		if c.Fits(v.Name, path) {
			return false
		}
		if n := slices.Index(path, itemElem); n >= 0 {
			path = path[:n] // the list the item is in, kept whole as it was
			val, _ = get(whole, pathOf(path))
		}
		keep(kept, c.Kind.Versions[i-1].Name, pathOf(path), val)
		return true
	})
	return out, nil
}

// itemElem stands, in a path of dropUnfit and Fits, for any item of a list.
const itemElem = "[]"

// dropUnfit deletes from m (at path) each field drop says so of, descending into objects and
// into the objects a list holds.
func dropUnfit(m map[string]any, path []string, drop func(path []string, val any) bool) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		p := append(slices.Clone(path), k)
		if drop(p, m[k]) {
			delete(m, k)
			continue
		}
		switch child := m[k].(type) {
		case map[string]any:
			dropUnfit(child, p, drop)
		case []any:
			for _, item := range child {
				if obj, ok := item.(map[string]any); ok {
					dropUnfit(obj, append(slices.Clone(p), itemElem), drop)
				}
			}
		}
	}
}

func keep(kept Kept, version, path string, val any) {
	if kept[version] == nil {
		kept[version] = map[string]any{}
	}
	kept[version][path] = val
}

// get, take and put read, remove and write the value at a dotted path of nested objects (see
// keysOf); the empty path is m itself.
func get(m map[string]any, path string) (any, bool) {
	if path == "" {
		return m, true
	}
	v, ok, _ := unstructured.NestedFieldNoCopy(m, keysOf(path)...)
	return v, ok
}

// take also removes the objects the removal leaves empty: a move's or a compute's parents are
// not values of their own.
func take(m map[string]any, path string) (any, bool) {
	v, ok := get(m, path)
	if !ok {
		return nil, false
	}
	keys := keysOf(path)
	for n := len(keys); n > 0; n-- {
		unstructured.RemoveNestedField(m, keys[:n]...)
		if parent, _ := get(m, pathOf(keys[:n-1])); n == 1 || len(parent.(map[string]any)) > 0 {
			break
		}
	}
	return v, ok
}

func put(m map[string]any, path string, v any) {
	keys := keysOf(path)
	for _, k := range keys[:len(keys)-1] {
		child, ok := m[k].(map[string]any)
		if !ok {
			child = map[string]any{}
			m[k] = child
		}
		m = child
	}
	m[keys[len(keys)-1]] = v
}

// pathOf joins keys into a dotted path, a dot or a backslash within a key (a map's key, such as
// a host name) escaped by a backslash; keysOf splits it again. A declared path (a change's field)
// holds neither, and splits at its dots.
func pathOf(keys []string) string {
	escape := strings.NewReplacer(`\`, `\\`, ".", `\.`)
	escaped := make([]string, len(keys))
	for i, k := range keys {
		escaped[i] = escape.Replace(k)
	}
	return strings.Join(escaped, ".")
}

func keysOf(path string) []string {
	var keys []string
	var key strings.Builder
	for i := 0; i < len(path); i++ {
		switch {
		case path[i] == '\\' && i+1 < len(path):
			i++
			key.WriteByte(path[i])
		case path[i] == '.':
			keys = append(keys, key.String())
			key.Reset()
		default:
			key.WriteByte(path[i])
		}
	}
	return append(keys, key.String())
}

// evaluateAny runs a conversion expression over a spec; null or an empty optional is nil.
func (c *Compiled) evaluateAny(e Expr, self map[string]any) (any, error) {
	return c.evaluate(e, map[string]any{VarSelf: self, VarObjects: []any{}, VarVariables: map[string]any{}}, anyJSON)
}
