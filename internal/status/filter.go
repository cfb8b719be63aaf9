package status

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/objcompare"
)

// Own is what this package writes in a kind's status: the declared fields, observedGeneration
// and the conditions it sets (Ready and the declared ones).
type Own struct {
	Fields     []string
	Conditions []string
	ignore     objcompare.Ignore
}

func ownOf(s chartapi.Status) Own {
	own := Own{Fields: s.FieldNames(), Conditions: s.ConditionTypes()}
	mine := map[string]bool{}
	for _, c := range own.Conditions {
		mine[c] = true
	}
	st := objcompare.Ignore{"conditions": func(a, b any) bool {
		return reflect.DeepEqual(withoutConditions(a, mine), withoutConditions(b, mine))
	}, fieldObservedGeneration: nil}
	for _, f := range own.Fields {
		st[f] = nil
	}
	own.ignore = objcompare.Ignore{
		"metadata": objcompare.Ignore{"resourceVersion": nil, "managedFields": nil},
		"status":   st,
	}
	return own
}

// ChangedBeyond reports whether an update of a custom resource changed anything besides what
// this package writes. Updates that did not are of no interest to any controller: without this
// filter each of this controller's writes would make it run again, and the objects a failing
// install creates and rolls back would keep the two controllers triggering each other.
func (own Own) ChangedBeyond(oldObj, newObj any) bool {
	o, ok := oldObj.(*unstructured.Unstructured)
	if !ok {
		return true
	}
	n, ok := newObj.(*unstructured.Unstructured)
	if !ok {
		return true
	}
	return !objcompare.Equal(o.Object, n.Object, own.ignore)
}

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
