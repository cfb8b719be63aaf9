package eventfilter

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type recordingHandler struct{ adds, updates, deletes int }

func (h *recordingHandler) OnAdd(any, bool)   { h.adds++ }
func (h *recordingHandler) OnUpdate(any, any) { h.updates++ }
func (h *recordingHandler) OnDelete(any)      { h.deletes++ }

func TestUpdateFilter(t *testing.T) {
	rec := &recordingHandler{}
	var h toolscache.ResourceEventHandler = filteredHandler{rec, Filter{Update: func(old, new any) bool { return old != new }}}
	h.OnAdd("a", false)
	h.OnUpdate("same", "same")
	h.OnUpdate("old", "new")
	h.OnDelete("a")
	if rec.adds != 1 || rec.updates != 1 || rec.deletes != 1 {
		t.Errorf("adds=%d updates=%d deletes=%d, want 1 each (one update filtered out)", rec.adds, rec.updates, rec.deletes)
	}
}

// A shard hears nothing of a custom resource another shard acts on but the update that hands
// it over, and its deletes.
func TestIgnoreClaimedElsewhere(t *testing.T) {
	cr := func(owner string, replicas int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": replicas}}}
		if owner != "" {
			u.SetAnnotations(map[string]string{"owner": owner})
		}
		return u
	}
	other := func(o client.Object) bool { return o.GetAnnotations()["owner"] == "b" }
	f := IgnoreClaimedElsewhere(other)
	rec := &recordingHandler{}
	var h toolscache.ResourceEventHandler = filteredHandler{rec, f}
	h.OnAdd(cr("b", 1), false)         // dropped: b's
	h.OnUpdate(cr("b", 1), cr("b", 2)) // dropped: b's
	h.OnUpdate(cr("b", 2), cr("", 2))  // passes: handed over
	h.OnUpdate(cr("a", 2), cr("a", 3)) // passes: this shard's
	h.OnAdd(cr("a", 1), false)         // passes
	h.OnDelete(cr("b", 2))             // passes
	if rec.adds != 1 || rec.updates != 2 || rec.deletes != 1 {
		t.Errorf("adds=%d updates=%d deletes=%d, want 1, 2 and 1", rec.adds, rec.updates, rec.deletes)
	}
}

func TestIgnoreStatusUpdatesIsThePluginsDependentRule(t *testing.T) {
	obj := func(replicas int64, status, version, revision string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"spec":   map[string]any{"replicas": replicas},
			"status": map[string]any{"phase": status},
		}}
		u.SetResourceVersion(version)
		u.SetAnnotations(map[string]string{"deployment.kubernetes.io/revision": revision})
		return u
	}
	base := obj(1, "a", "1", "1")
	for name, tt := range map[string]struct {
		newObj *unstructured.Unstructured
		want   bool
	}{
		"status and resourceVersion": {obj(1, "b", "2", "1"), false},
		"the Deployment revision":    {obj(1, "a", "2", "2"), true},
		"spec":                       {obj(2, "a", "2", "1"), true},
	} {
		if got := IgnoreStatusUpdates(base, tt.newObj); got != tt.want {
			t.Errorf("%s: passed %v, want %v", name, got, tt.want)
		}
	}
}
