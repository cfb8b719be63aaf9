package status

import (
	"context"
	"fmt"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
