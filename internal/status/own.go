package status

import (
	"fmt"
	"reflect"

	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
)

// Own is what the status controller writes in a kind's status: the declared fields,
// observedGeneration and the conditions it sets (Ready and the declared ones).
type Own struct {
	Fields     []string
	Conditions []string
	written    caches.Ignore
}

// OwnOf returns what the status controller writes for a kind with this status declaration.
func OwnOf(s chartapi.Status) Own {
	own := Own{Fields: s.FieldNames(), Conditions: append(s.ConditionTypes(), names.ConditionRolloutHeld)}
	mine := map[string]bool{}
	for _, c := range own.Conditions {
		mine[c] = true
	}
	st := caches.Ignore{names.StatusConditions: func(a, b any) bool {
		return reflect.DeepEqual(withoutConditions(a, mine), withoutConditions(b, mine))
	}, names.StatusObservedGeneration: nil}
	for _, f := range own.Fields {
		st[f] = nil
	}
	own.written = caches.Ignore{
		"metadata": caches.Ignore{"resourceVersion": nil, "managedFields": nil},
		"status":   st,
	}
	return own
}

// Written is what the status controller's writes change in a whole custom resource, as the
// fields caches.Equal ignores: two objects equal but for these differ only by its writes.
func (own Own) Written() caches.Ignore { return own.written }

func withoutConditions(conditions any, types map[string]bool) []any {
	list, _ := conditions.([]any)
	kept := make([]any, 0, len(list))
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && types[fmt.Sprint(m["type"])] {
			continue
		}
		kept = append(kept, c)
	}
	return kept
}
