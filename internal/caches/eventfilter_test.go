package caches

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type recordingHandler struct{ adds, updates, deletes int }

func (h *recordingHandler) OnAdd(any, bool)   { h.adds++ }
func (h *recordingHandler) OnUpdate(any, any) { h.updates++ }
func (h *recordingHandler) OnDelete(any)      { h.deletes++ }

func TestUpdateFilter(t *testing.T) {
	rec := &recordingHandler{}
	h := Filter{Update: func(old, new any) bool { return old != new }}.around(rec)
	h.OnAdd("a", false)
	h.OnUpdate("same", "same")
	h.OnUpdate("old", "new")
	h.OnDelete("a")
	if rec.adds != 1 || rec.updates != 1 || rec.deletes != 1 {
		t.Errorf("adds=%d updates=%d deletes=%d, want 1 each (one update filtered out)", rec.adds, rec.updates, rec.deletes)
	}
}

// A shard hears nothing of a custom resource another shard acts on but the update that hands
// it over, and its deletes; of its own, nothing of status writes and added finalizers.
func TestCustomResources(t *testing.T) {
	cr := func(owner string, replicas int64, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": replicas}}}
		if owner != "" {
			u.SetAnnotations(map[string]string{"owner": owner})
		}
		for _, m := range mutate {
			m(u)
		}
		return u
	}
	status := func(phase string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"phase": phase}
			u.SetResourceVersion(phase)
		}
	}
	finalizer := func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"uninstall"}) }
	other := func(o client.Object) bool { return o.GetAnnotations()["owner"] == "b" }
	for _, tc := range []struct {
		name     string
		old, new *unstructured.Unstructured
		passes   bool
	}{
		{"another shard's", cr("b", 1), cr("b", 2), false},
		{"handed over", cr("b", 2), cr("", 2), true},
		{"a spec change", cr("a", 2), cr("a", 3), true},
		{"a status write", cr("a", 2, status("x")), cr("a", 2, status("y")), false},
		{"a finalizer added", cr("a", 2), cr("a", 2, finalizer), false},
		{"a finalizer removed", cr("a", 2, finalizer), cr("a", 2), true},
		{"an annotation", cr("a", 2), cr("a", 2, func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"pause": "true"}) }), true},
	} {
		rec := &recordingHandler{}
		h := CustomResources(other).around(rec)
		h.OnUpdate(tc.old, tc.new)
		if (rec.updates == 1) != tc.passes {
			t.Errorf("%s: passed %v, want %v", tc.name, rec.updates == 1, tc.passes)
		}
	}
	rec := &recordingHandler{}
	h := CustomResources(other).around(rec)
	h.OnAdd(cr("b", 1), false) // dropped: b's
	h.OnAdd(cr("a", 1), false) // passes
	h.OnDelete(cr("b", 2))     // passes
	if rec.adds != 1 || rec.deletes != 1 {
		t.Errorf("adds=%d deletes=%d, want 1 each", rec.adds, rec.deletes)
	}
}

// The stock rule is the plugins' dependent predicate; the fast path "bookkeeping" drops the
// Deployment revision too, and nothing else.
func TestReleaseObjectUpdatesAreThePluginsDependentRuleAndBookkeeping(t *testing.T) {
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
		newObj                *unstructured.Unstructured
		want, wantBookkeeping bool
	}{
		"status and resourceVersion": {obj(1, "b", "2", "1"), false, false},
		"the Deployment revision":    {obj(1, "a", "2", "2"), true, false},
		"spec":                       {obj(2, "a", "2", "1"), true, true},
		"spec and the revision":      {obj(2, "a", "2", "2"), true, true},
	} {
		if got := ReleaseObjectUpdates(false)(base, tt.newObj); got != tt.want {
			t.Errorf("%s: the plugins' rule passed %v, want %v", name, got, tt.want)
		}
		if got := ReleaseObjectUpdates(true)(base, tt.newObj); got != tt.wantBookkeeping {
			t.Errorf("%s: with bookkeeping passed %v, want %v", name, got, tt.wantBookkeeping)
		}
	}
}
