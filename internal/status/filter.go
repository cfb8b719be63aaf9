package status

import (
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// ownFields are the status fields this package writes.
var ownFields = []string{"replicas", "readyReplicas", "selector", "image", "url", "observedGeneration"}

// ChangedBeyondOwnFields reports whether an update of a custom resource changed anything besides
// the status fields this package writes. Updates that did not are of no interest to any
// controller: without this filter each of this controller's writes would make the Helm
// reconciler run again, and the objects a failing install creates and rolls back would keep
// the two controllers triggering each other.
func ChangedBeyondOwnFields(oldObj, newObj any) bool {
	o, ok := oldObj.(*unstructured.Unstructured)
	if !ok {
		return true
	}
	n, ok := newObj.(*unstructured.Unstructured)
	if !ok {
		return true
	}
	return !reflect.DeepEqual(withoutOwnFields(o), withoutOwnFields(n))
}

func withoutOwnFields(u *unstructured.Unstructured) map[string]any {
	obj := runtime.DeepCopyJSON(u.Object)
	unstructured.RemoveNestedField(obj, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(obj, "metadata", "managedFields")
	st, ok := obj["status"].(map[string]any)
	if !ok {
		return obj
	}
	for _, f := range ownFields {
		delete(st, f)
	}
	if conds, ok := st["conditions"].([]any); ok {
		kept := make([]any, 0, len(conds))
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == ConditionAvailable {
				continue
			}
			kept = append(kept, c)
		}
		st["conditions"] = kept
	}
	return obj
}
