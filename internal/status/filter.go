package status

import (
	"context"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/objcompare"
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
	return !objcompare.Equal(o.Object, n.Object, ownWrites)
}

// ownWrites is what this package writes, and every write changes.
var ownWrites = func() objcompare.Ignore {
	st := objcompare.Ignore{"conditions": equalBeyondAvailable}
	for _, f := range ownFields {
		st[f] = nil
	}
	return objcompare.Ignore{
		"metadata": objcompare.Ignore{"resourceVersion": nil, "managedFields": nil},
		"status":   st,
	}
}()

// equalBeyondAvailable compares two lists of conditions but for the Available condition.
func equalBeyondAvailable(a, b any) bool {
	return reflect.DeepEqual(withoutAvailable(a), withoutAvailable(b))
}

func withoutAvailable(conditions any) []any {
	list, _ := conditions.([]any)
	kept := make([]any, 0, len(list))
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == ConditionAvailable {
			continue
		}
		kept = append(kept, c)
	}
	return kept
}

// DeletedFromDeployedRelease reports whether a delete event is of an object whose controlling
// custom resource (of one of the kinds) has a deployed release, or is being deleted. Only those
// deletes are drift to correct, or the end of an uninstall's wait. A failing install creates some objects and removes them again on rollback; if
// those deletes reached the Helm reconciler's watches on the release's kinds, each failed
// attempt would start the next one at once, and the retries would never back off.
// Objects not controlled by one of the kinds pass.
func DeletedFromDeployedRelease(reader client.Reader, kinds map[schema.GroupVersionKind]bool) func(obj any) bool {
	return func(obj any) bool {
		if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		o, ok := obj.(metav1.Object)
		if !ok {
			return true
		}
		ref := metav1.GetControllerOf(o)
		if ref == nil {
			return true
		}
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		if !kinds[gvk] {
			return true
		}
		owner := &unstructured.Unstructured{}
		owner.SetGroupVersionKind(gvk)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := reader.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, owner); err != nil {
			// Gone (or unreadable): a reconcile would find nothing to restore.
			return false
		}
		if owner.GetDeletionTimestamp() != nil {
			return true // an uninstall may be waiting for this object to go (uninstall-wait)
		}
		st, _, _ := unstructured.NestedMap(owner.Object, "status")
		return deployed(st)
	}
}
