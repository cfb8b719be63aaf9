package crdgen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The apiserver estimates the cost of every CEL rule of a CRD, multiplied by how many times it
// may run (a rule under a map or a list without maxProperties or maxItems runs for as many
// entries as the largest request holds), and refuses the CRD when one rule, or all of them
// together, are over its budget. A check the generator adds for the user's benefit (an enum that
// lets null pass, a map's key pattern, propertyNames) must never cost the chart its kind: where
// the apiserver's estimate refuses one, the generator writes it another way, or leaves it to
// Helm, which checks the values against the whole values.schema.json at every install and
// upgrade and names the key in the ReleaseFailed condition. A rule of the chart's own is never
// changed: over the budget, it is refused, named.

// Marks the converted schema carries while it is built, and Generate strips before it is
// written: markOwn on a rule the generator wrote (its ownRule), markDeletesDefault on a node
// whose null deletes a default values.yaml gives.
const (
	markOwn            = "\x00own"
	markDeletesDefault = "\x00deletesDefault"
)

// ownRule is a CEL rule the generator wrote for a check of the chart's schema, and how to write
// that check when the rule is over the apiserver's budget.
type ownRule struct {
	path  string // the node's path in spec, as notes name it
	check string // what of the chart's schema the rule checks
	// enum, when set, is the enum the rule stands for (to let null pass): it can be written back
	// as an OpenAPI enum where null means nothing more than no value.
	enum []any
}

// fitBudget rewrites the generator's own rules that the apiserver's validation errors name as
// over its cost budget, alone or as part of the CRD's total; it returns a note per rewritten
// rule. It fails on any other error, and, naming them, when the chart's own rules are over the
// budget without the generator's.
func fitBudget(spec map[string]any, errs field.ErrorList) ([]string, error) {
	type named struct {
		node map[string]any
		own  *ownRule
		why  string
	}
	var rewritten []named
	var over field.ErrorList // the chart's own rules, each over the budget
	total := false
	for _, e := range errs {
		if e.Type != field.ErrorTypeForbidden || !strings.Contains(e.Detail, "cost") {
			return nil, errs.ToAggregate()
		}
		if strings.HasSuffix(e.Field, "openAPIV3Schema") {
			total = true
			continue
		}
		if node, own := locateRule(spec, e.Field); own != nil {
			// One rule may be named twice: over its own budget, and among the total's most costly.
			if !slices.ContainsFunc(rewritten, func(r named) bool { return r.own == own }) {
				why, _, _ := strings.Cut(e.Detail, " (try") // the apiserver's advice to the rule's author
				rewritten = append(rewritten, named{node, own, why})
			}
		} else if strings.Contains(e.Detail, "exceeds budget") {
			over = append(over, e)
		}
	}
	if len(over) > 0 {
		return nil, fmt.Errorf("the chart's own rules are over the apiserver's cost budget: %w", over.ToAggregate())
	}
	if total && len(rewritten) == 0 {
		// The rules the total's error names are the chart's own; the generator's are each under
		// a hundredth of the budget, but together they may still tip it.
		forEachOwnRule(spec, func(node map[string]any, own *ownRule) {
			rewritten = append(rewritten, named{node, own, "the CRD's rules together are over the apiserver's cost budget"})
		})
	}
	if len(rewritten) == 0 {
		return nil, fmt.Errorf("the chart's own rules are over the apiserver's cost budget: %w", errs.ToAggregate())
	}
	notes := make([]string, 0, len(rewritten))
	for _, r := range rewritten {
		notes = append(notes, rewrite(r.node, r.own, r.why))
	}
	return notes, nil
}

// rewrite takes the generator's rule own off node and writes its check another way: an enum
// back as an OpenAPI enum where null means no more than no value (values.yaml gives the key no
// default, so a null the apiserver drops renders the same), else nothing at kubectl apply.
// It returns the note that says so.
func rewrite(node map[string]any, own *ownRule, why string) string {
	rules, _ := node["x-kubernetes-validations"].([]any)
	var rule map[string]any
	kept := rules[:0:0]
	for _, r := range rules {
		if m, _ := r.(map[string]any); m[markOwn] == own {
			rule = m
			continue
		}
		kept = append(kept, r)
	}
	if len(kept) == 0 {
		delete(node, "x-kubernetes-validations")
	} else {
		node["x-kubernetes-validations"] = kept
	}
	head := fmt.Sprintf("%s: %s, the rule %q, is over the apiserver's cost budget (%s)", own.path, own.check, rule["rule"], why)
	if own.enum != nil && node[markDeletesDefault] != true {
		node["enum"] = own.enum
		delete(node, "nullable")
		return head + ": written as an OpenAPI enum instead; a null there is dropped at kubectl apply, as no value " +
			"(values.yaml gives the key none, so both render the same)"
	}
	return head + ": not checked at kubectl apply; Helm checks it against values.schema.json at every install and " +
		"upgrade, and the ReleaseFailed condition names the key"
}

// forEachOwnRule calls f for every rule the generator wrote below node.
func forEachOwnRule(node map[string]any, f func(node map[string]any, own *ownRule)) {
	props, _ := node["properties"].(map[string]any)
	for _, name := range sortedKeys(props) {
		if child, ok := props[name].(map[string]any); ok {
			forEachOwnRule(child, f)
		}
	}
	for _, k := range []string{"additionalProperties", "items"} {
		if child, ok := node[k].(map[string]any); ok {
			forEachOwnRule(child, f)
		}
	}
	rules, _ := node["x-kubernetes-validations"].([]any)
	for _, r := range rules {
		if m, ok := r.(map[string]any); ok {
			if own, ok := m[markOwn].(*ownRule); ok {
				f(node, own)
			}
		}
	}
}

// locateRule finds, below the spec schema, the generator's rule that an apiserver error's field
// path names (".../openAPIV3Schema.properties[spec].properties[a].additionalProperties.items
// .x-kubernetes-validations[0].rule"), and the node that holds it; nil for any other rule.
func locateRule(spec map[string]any, path string) (map[string]any, *ownRule) {
	const root = "openAPIV3Schema.properties[spec]"
	at := strings.Index(path, root)
	if at < 0 {
		return nil, nil
	}
	rest, node := path[at+len(root):], spec
	for {
		var child any
		switch {
		case strings.HasPrefix(rest, ".properties["):
			end := strings.Index(rest, "]")
			props, _ := node["properties"].(map[string]any)
			child, rest = props[rest[len(".properties["):end]], rest[end+1:]
		case strings.HasPrefix(rest, ".additionalProperties"), strings.HasPrefix(rest, ".items"):
			k := strings.SplitN(rest[1:], ".", 2)[0]
			child, rest = node[k], rest[1+len(k):]
		case strings.HasPrefix(rest, ".x-kubernetes-validations[") && strings.HasSuffix(rest, "].rule"):
			i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rest, ".x-kubernetes-validations["), "].rule"))
			rules, _ := node["x-kubernetes-validations"].([]any)
			if err != nil || i < 0 || i >= len(rules) {
				return nil, nil
			}
			rule, _ := rules[i].(map[string]any)
			own, _ := rule[markOwn].(*ownRule)
			return node, own
		}
		m, ok := child.(map[string]any)
		if !ok {
			return nil, nil
		}
		node = m
	}
}

// unmarked is a copy of a converted schema without the generator's marks.
func unmarked(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			if !strings.HasPrefix(k, "\x00") {
				out[k] = unmarked(v)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = unmarked(v)
		}
		return out
	}
	return v
}
