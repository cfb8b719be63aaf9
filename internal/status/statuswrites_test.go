package status

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/example/myproxy-operator/internal/chartapi"
)

func TestChangedBeyondStatusWrites(t *testing.T) {
	base := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "p", "resourceVersion": "1", "generation": int64(1)},
			"spec":     map[string]any{"replicas": int64(2)},
			"status": map[string]any{
				"replicas": int64(1),
				"conditions": []any{
					map[string]any{"type": "Deployed", "status": "True"},
					map[string]any{"type": "Available", "status": "False"},
				},
			},
		}}
	}
	cases := []struct {
		name   string
		mutate func(u *unstructured.Unstructured)
		want   bool
	}{
		{name: "resourceVersion only", mutate: func(u *unstructured.Unstructured) { u.SetResourceVersion("2") }, want: false},
		{name: "own fields only", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(2), "status", "readyReplicas")
			_ = unstructured.SetNestedField(u.Object, "http://p.ns.svc:80", "status", "url")
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			conds[1].(map[string]any)["status"] = "True"
			_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
		}, want: false},
		{name: "spec", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas")
		}, want: true},
		{name: "the Helm reconciler's condition", mutate: func(u *unstructured.Unstructured) {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			conds[0].(map[string]any)["status"] = "False"
			_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
		}, want: true},
		{name: "the Helm reconciler drops own fields while writing its own", mutate: func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Deployed", "status": "False"}}}
		}, want: true},
		{name: "finalizers", mutate: func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"f"}) }, want: true},
	}
	changed := ChangedBeyondStatusWrites(chartapi.Status{
		Fields:     map[string]chartapi.Field{"replicas": {}, "readyReplicas": {}, "url": {}},
		Conditions: []chartapi.Condition{{Type: "Available"}},
	})
	for _, c := range cases {
		old, updated := base(), base()
		c.mutate(updated)
		if got := changed.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated}); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
		if old.GetResourceVersion() != "1" {
			t.Fatalf("%s: the filter modified its input", c.name)
		}
	}
}
