package status

import (
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
)

// Own is what the status controller writes in a kind's status: the declared fields,
// observedGeneration and the conditions it sets (Ready and the declared ones).
type Own struct {
	Fields     []string
	Conditions []string
}

// OwnOf returns what the status controller writes for a kind with this status declaration.
func OwnOf(s chartapi.Status) Own {
	return Own{Fields: s.FieldNames(), Conditions: append(s.ConditionTypes(), names.ConditionRolloutHeld)}
}

// ChangedBeyondStatusWrites returns an update filter for custom resources that passes an update
// only when it changed something besides what the status controller writes (own). Updates that
// did not are of no interest to any controller: without this filter each of the status
// controller's writes would make it run again, and the objects a failing install creates and
// rolls back would keep the two controllers triggering each other.
func ChangedBeyondStatusWrites(own Own) func(oldObj, newObj any) bool {
	st := caches.Ignore{names.StatusConditions: func(a, b any) bool {
		return reflect.DeepEqual(withoutConditions(a, own.Conditions), withoutConditions(b, own.Conditions))
	}, names.StatusObservedGeneration: nil}
	for _, f := range own.Fields {
		st[f] = nil
	}
	written := caches.Ignore{"metadata": caches.Ignore{"resourceVersion": nil, "managedFields": nil}, "status": st}
	return func(oldObj, newObj any) bool {
		o, okOld := oldObj.(*unstructured.Unstructured)
		n, okNew := newObj.(*unstructured.Unstructured)
		return !okOld || !okNew || !caches.Equal(o.Object, n.Object, written)
	}
}

// withoutConditions is a copy of a status's conditions without those of the given types (never
// nil, so that two lists compare by their conditions alone).
func withoutConditions(conditions any, types []string) []any {
	list, _ := conditions.([]any)
	return slices.DeleteFunc(append([]any{}, list...), func(c any) bool {
		m, ok := c.(map[string]any)
		return ok && slices.Contains(types, fmt.Sprint(m["type"]))
	})
}
