package crdgen

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/myproxy-operator/internal/chartapi"
)

// A check the generator adds never costs a chart its kind: where the apiserver estimates its CEL
// rule over the budget, alone or with the CRD's other rules, it is written another way, and
// said; a rule of the chart's own over the budget is refused, named. Every CRD returned passes
// the apiserver's own validation (Generate runs it).
func TestChecksOverTheCostBudgetAreWrittenAnotherWay(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "x.example.com", Version: "v1", Kind: "X"}
	// entry is a map's value schema whose nullable enum (a CEL rule, so that null passes) the
	// apiserver estimates at about 13 per entry.
	entry := `{"type":"object","properties":{"mode":{"type":["string","null"],"enum":["a","b",null]}}}`
	// nearBudget is a rule of the chart's own at about 90% of the budget of one rule.
	nearBudget := `"hosts":{"type":"array","maxItems":85000,"items":{"type":"string","maxLength":63},` +
		`"x-kubernetes-validations":[{"rule":"self.all(h, h.matches('^[a-z0-9.-]+$'))"}]}`
	var many []string
	for i := range 12 { // each under the budget of one rule, together over the CRD's
		many = append(many, fmt.Sprintf(`"m%02d":{"type":"object","maxProperties":700000,"additionalProperties":%s}`, i, entry))
	}
	cases := []struct {
		name     string
		schema   string
		defaults map[string]any
		// at is the path of the node whose check is written another way; enum, whether as an
		// OpenAPI enum (else not at all); kept, the paths whose rule stays.
		at    []string
		enum  bool
		kept  []string
		notes int
		// err, when set, is what the refusal says.
		err string
	}{
		{name: "an enum under a map of unbounded size becomes an OpenAPI enum where null is no value",
			schema:   `{"type":"object","properties":{"ports":{"type":"object","additionalProperties":` + entry + `},` + nearBudget + `}}`,
			defaults: map[string]any{"ports": map[string]any{"web": map[string]any{"port": 80.0, "mode": nil}}},
			at:       []string{"properties.ports.additionalProperties.properties.mode"}, enum: true,
			kept: []string{"properties.hosts"}, notes: 1},
		{name: "where null deletes a default, the check is left to Helm",
			schema:   `{"type":"object","properties":{"ports":{"type":"object","additionalProperties":` + entry + `}}}`,
			defaults: map[string]any{"ports": map[string]any{"web": map[string]any{"mode": "a"}}},
			at:       []string{"properties.ports.additionalProperties.properties.mode"}, notes: 1},
		{name: "under a list of unbounded size too",
			schema: `{"type":"object","properties":{"l":{"type":"array","items":` + entry + `}}}`,
			at:     []string{"properties.l.items.properties.mode"}, enum: true, notes: 1},
		{name: "a bound the chart gives keeps the rule",
			schema: `{"type":"object","properties":{"ports":{"type":"object","maxProperties":100,"additionalProperties":` + entry + `}}}`,
			kept:   []string{"properties.ports.additionalProperties.properties.mode"}},
		{name: "propertyNames under a map of unbounded size is left to Helm",
			schema: `{"type":"object","properties":{"groups":{"type":"object","additionalProperties":{"type":"object",` +
				`"propertyNames":{"pattern":"^[a-z]+$"},"additionalProperties":{"type":"string"}}}}}`,
			at: []string{"properties.groups.additionalProperties"}, notes: 1},
		{name: "rules each under the budget of one, together over the CRD's: as few rewritten as fit it",
			schema: `{"type":"object","properties":{` + strings.Join(many, ",") + `,` + nearBudget + `}}`,
			kept:   []string{"properties.hosts"}, notes: -1},
		{name: "a rule of the chart's own over the budget is refused, named",
			schema: `{"type":"object","properties":{"hosts":{"type":"array","maxItems":1000000,"items":{"type":"string","maxLength":63},` +
				`"x-kubernetes-validations":[{"rule":"self.all(h, h.matches('^[a-z]+$'))"}]}}}`,
			err: "the chart's own rules are over the apiserver's cost budget: spec.validation.openAPIV3Schema.properties[spec].properties[hosts].x-kubernetes-validations[0].rule"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			crd, notes, err := Generate(gvk, &chartapi.Kind{}, Spec{Schema: []byte(c.schema), Defaults: c.defaults})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			spec := specOf(t, crd)
			if c.notes < 0 { // as many as the rules rewritten, the others kept
				rewritten := 0
				for i := range many {
					if at(spec, fmt.Sprintf("properties.m%02d.additionalProperties.properties.mode.enum", i)) != nil {
						rewritten++
					}
				}
				c.notes = max(rewritten, 1)
			}
			if len(notes) != c.notes {
				t.Errorf("%d notes, want %d: %q", len(notes), c.notes, notes)
			}
			for _, path := range c.at {
				node, _ := at(spec, path).(map[string]any)
				if node["x-kubernetes-validations"] != nil {
					t.Errorf("%s keeps its rule: %s", path, show(node))
				}
				hasEnum := node["enum"] != nil && node["nullable"] == nil
				if hasEnum != c.enum {
					t.Errorf("%s: an OpenAPI enum (without null) %v, want %v: %s", path, hasEnum, c.enum, show(node))
				}
				said := strings.TrimPrefix(strings.ReplaceAll(path, ".properties.", "."), "properties.")
				said = "spec." + strings.NewReplacer(".additionalProperties", "[]", ".items", "[]").Replace(said)
				how := "not checked at kubectl apply; Helm checks it"
				if c.enum {
					how = "written as an OpenAPI enum instead"
				}
				if !strings.Contains(strings.Join(notes, "\n"), said+": ") || !strings.Contains(strings.Join(notes, "\n"), how) {
					t.Errorf("no note says %s is %q: %q", said, how, notes)
				}
			}
			for _, path := range c.kept {
				if at(spec, path+".x-kubernetes-validations") == nil {
					t.Errorf("%s lost its rule: %s", path, show(at(spec, path)))
				}
			}
		})
	}
}
