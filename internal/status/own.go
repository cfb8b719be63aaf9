package status

import (
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
)

// ChangedBeyondStatusWrites returns an update filter for custom resources of a kind with this
// status declaration that passes an update only when it changed something besides what the
// status controller writes: the declared fields, observedGeneration and the conditions it sets
// (Ready, the declared ones and RolloutHeld). Updates that did not are of no interest to any
// controller: without this filter each of the status controller's writes would make it run
// again, and the objects a failing install creates and rolls back would keep the two
// controllers triggering each other.
func ChangedBeyondStatusWrites(s chartapi.Status) predicate.Predicate {
	conditions := append(s.ConditionTypes(), names.ConditionRolloutHeld)
	st := caches.Ignore{names.StatusConditions: func(a, b any) bool {
		return reflect.DeepEqual(withoutConditions(a, conditions), withoutConditions(b, conditions))
	}, names.StatusObservedGeneration: nil}
	for _, f := range s.FieldNames() {
		st[f] = nil
	}
	written := caches.Ignore{"metadata": caches.Ignore{"resourceVersion": nil, "managedFields": nil}, "status": st}
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*unstructured.Unstructured)
		n, okNew := e.ObjectNew.(*unstructured.Unstructured)
		return !okOld || !okNew || !caches.Equal(o.Object, n.Object, written)
	}}
}
